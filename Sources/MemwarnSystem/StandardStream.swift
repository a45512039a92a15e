#if canImport(Glibc)
import Glibc
#endif

/// This process's standard output and error, written whole and unbuffered, so a line shows at
/// once even through a pipe (`memwarn watch`, a probe's replies) and lines of several threads
/// never interleave within a line.
package enum StandardStream {
    /// Standard output.
    case output
    /// Standard error.
    case error

    private var descriptor: Int32 { self == .output ? STDOUT_FILENO : STDERR_FILENO }

    /// Whether the stream is a terminal (`isatty`), where a line may be rewritten in place;
    /// not a pipe or a file.
    package var isTerminal: Bool { isatty(descriptor) == 1 }

    /// Writes `text` and a newline. A stream that is gone (a closed pipe) takes nothing: the
    /// rest is dropped, and nothing is thrown.
    package func writeLine(_ text: String) {
        write(Array((text + "\n").utf8))
    }

    /// Writes `bytes` as they are.
    package func write(_ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress, $0.count) }
            if written < 0 && errno == EINTR { continue }
            guard written > 0 else { return }
            offset += written
        }
    }
}
