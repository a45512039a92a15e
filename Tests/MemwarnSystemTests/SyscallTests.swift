import MemwarnSystem
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The one syscall wrapper and the owned descriptor.
@Suite struct SyscallTests {
    @Test func anInterruptedCallIsRetriedAndAFailedOneThrowsItsNameAndErrno() throws {
        var calls = 0
        let result = try Syscall.retrying("test-call") { () -> Int32 in
            calls += 1
            guard calls > 2 else {
                errno = EINTR
                return -1
            }
            return 7
        }
        #expect(result == 7 && calls == 3)
        let error = #expect(throws: SystemError.self) {
            try Syscall.retrying("open", path: "/no/such/file") { () -> Int32 in
                errno = ENOENT
                return -1
            }
        }
        #expect(error?.errno == ENOENT && error?.call == "open" && error?.path == "/no/such/file")
        #expect(error?.description == "open /no/such/file failed: No such file or directory")
        #expect(error?.isTransient == false)
        #expect(SystemError("read", errno: EMFILE).isTransient)
    }

    @Test func aNonBlockingCallThatWouldBlockIsNilNotAnError() throws {
        let counter = try FileDescriptor.eventCounter()
        var chunk = [UInt8](repeating: 0, count: 8)
        #expect(try counter.read(into: &chunk) == nil, "an eventfd at 0 would block")
        #expect(try counter.readCounter() == 0)
        try counter.signalCounter()
        try counter.signalCounter()
        #expect(try counter.readCounter() == 2)
    }

    @Test func anOwnedDescriptorIsClosedWhenDroppedAndStaysOpenWhenTaken() throws {
        // A file of this test's own: a freed number may go at once to a descriptor another
        // suite opens, so "closed" is "not this file any more", not only EBADF.
        var template = Array("/tmp/memwarn-syscall-test-XXXXXX".utf8CString)
        let made = mkstemp(&template)
        try #require(made >= 0)
        Glibc.close(made)
        let path = String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
        defer { unlink(path) }
        var own = stat()
        try #require(stat(path, &own) == 0)
        let namesTheFile: (Int32) -> Bool = { number in
            var seen = stat()
            return fstat(number, &seen) == 0 && seen.st_dev == own.st_dev && seen.st_ino == own.st_ino
        }
        var kept: Int32 = -1
        var dropped: Int32 = -1
        do {
            let one = try FileDescriptor.open(path, O_RDONLY)
            dropped = one.rawValue
            let two = try FileDescriptor.open(path, O_RDONLY)
            kept = two.take()
        }
        #expect(!namesTheFile(dropped), "dropping closes it")
        #expect(namesTheFile(kept), "taken: still open")
        #expect(fcntl(kept, F_GETFD) & FD_CLOEXEC != 0, "close-on-exec, as every descriptor made here")
        try FileDescriptor(adopting: kept).close()
        #expect(!namesTheFile(kept))
    }

    @Test func aPipesWriteEndClosedGivesItsReaderTheEnd() throws {
        let pipe = try PipeEnds()
        try pipe.writeEnd.writeAll(Array("hello".utf8))
        let reader = pipe.keepingReadEnd()
        #expect(try reader.readToEnd() == Array("hello".utf8), "read to the end: the write end is closed")
    }

    @Test func aFileLargerThanTheLimitIsRefusedWithEFBIG() throws {
        let pipe = try PipeEnds()
        try pipe.writeEnd.writeAll([UInt8](repeating: 1, count: 10_000))
        let reader = pipe.keepingReadEnd()
        let error = #expect(throws: SystemError.self) { try reader.readToEnd(limit: 4_096) }
        #expect(error?.errno == EFBIG)
    }

    @Test func aUnixSocketConnectsAndKnowsItsPeer() throws {
        let path = "/tmp/memwarn-system-test-\(getpid()).sock"
        unlink(path)
        defer { unlink(path) }
        let address = try UnixSocketAddress(path: path)
        let listener = try FileDescriptor.unixStreamSocket(nonBlocking: true)
        try listener.bind(to: address)
        try listener.listen(backlog: 4)
        #expect(try listener.acceptConnection() == nil, "nobody connected yet")
        let client = try FileDescriptor.unixStreamSocket(nonBlocking: false)
        try client.connect(to: address)
        guard let accepted = try listener.acceptConnection() else {
            Issue.record("a connection was made but none is waiting")
            return
        }
        let peer = try accepted.peerCredentials()
        #expect(peer.pid == getpid() && peer.uid == geteuid() && peer.gid == getegid())
        #expect(try client.send(ArraySlice("ping\n".utf8)) == 5)
        #expect(try accepted.waitUntilReady(timeout: .seconds(5)))
        var chunk = [UInt8](repeating: 0, count: 16)
        #expect(try accepted.receive(into: &chunk) == 5)
        let refused = #expect(throws: SystemError.self) { try UnixSocketAddress(path: "/" + String(repeating: "x", count: 200)) }
        #expect(refused?.errno == ENAMETOOLONG)
    }

    @Test(arguments: [(UInt64(0), "0.0 MiB"), (268_435_456, "256.0 MiB"), (1_610_612_736, "1.50 GiB"), (1_153_433, "1.1 MiB"), (1_101_004, "1.0 MiB")])
    func sizesAreDescribedAsPrintfWouldRoundThem(bytes: UInt64, text: String) {
        #expect(ByteSize.describe(bytes) == text)
    }
}
