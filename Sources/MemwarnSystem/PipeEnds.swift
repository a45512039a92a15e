import CLinuxCalls

/// A pipe's two ends, both close-on-exec (named so as not to clash with Foundation's `Pipe`).
package struct PipeEnds: ~Copyable {
    /// The end to read.
    package let readEnd: FileDescriptor
    /// The end to write.
    package let writeEnd: FileDescriptor

    /// A new pipe.
    ///
    /// - Throws: ``SystemError`` from `pipe2`.
    package init() throws(SystemError) {
        var ends: [Int32] = [-1, -1]
        try Syscall.retrying("pipe2") { memwarn_pipe_cloexec(&ends) }
        readEnd = FileDescriptor(adopting: ends[0])
        writeEnd = FileDescriptor(adopting: ends[1])
    }

    /// Closes the write end (a child holds its own copy now) and keeps the read end.
    package consuming func keepingReadEnd() -> FileDescriptor {
        _ = writeEnd
        return readEnd
    }

    /// Closes the read end (a child holds its own copy now) and keeps the write end.
    package consuming func keepingWriteEnd() -> FileDescriptor {
        _ = readEnd
        return writeEnd
    }
}
