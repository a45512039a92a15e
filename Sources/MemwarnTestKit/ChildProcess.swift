public import CgroupKit
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Where SwiftPM put the running executable and its sibling products.
public enum ProductsDirectory {
    /// The folder of `/proc/self/exe`.
    public static var path: String {
        var buffer = [CChar](repeating: 0, count: 4096)
        let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        guard count > 0 else { return "." }
        let exe = String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return String(exe[..<(exe.lastIndex(of: "/") ?? exe.endIndex)])
    }
}

/// Starting child processes with pipes, without Foundation's `Process`.
public enum ChildProcess {
    /// Spawns `arguments` with its stdin and stdout connected to pipes (stderr inherited).
    ///
    /// - Returns: the pid, the write end of its stdin and the read end of its stdout.
    public static func spawn(_ arguments: [String], environment: [String]? = nil) throws(CgroupError) -> (pid: Int32, input: Int32, output: Int32) {
        var toChild: [Int32] = [0, 0]
        var fromChild: [Int32] = [0, 0]
        guard pipe(&toChild) == 0, pipe(&fromChild) == 0 else {
            throw CgroupError(.unsupported, "pipe failed: \(String(cString: strerror(errno)))")
        }
        for descriptor in toChild + fromChild { _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, toChild[0], 0)
        posix_spawn_file_actions_adddup2(&actions, fromChild[1], 1)
        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var pid: Int32 = 0
        let status: Int32
        if let environment {
            var envp: [UnsafeMutablePointer<CChar>?] = environment.map { strdup($0) } + [nil]
            defer { for pointer in envp { free(pointer) } }
            status = posix_spawn(&pid, arguments[0], &actions, nil, &argv, &envp)
        } else {
            status = posix_spawn(&pid, arguments[0], &actions, nil, &argv, environ)
        }
        close(toChild[0])
        close(fromChild[1])
        guard status == 0 else {
            close(toChild[1])
            close(fromChild[0])
            throw CgroupError(.unsupported, "posix_spawn \(arguments[0]) failed: \(String(cString: strerror(status)))", path: arguments[0])
        }
        return (pid, toChild[1], fromChild[0])
    }

    /// Reads one line (without its newline) from a pipe, blocking.
    ///
    /// - Throws: ``CgroupError`` `.unreadable` at end of file (the child exited).
    public static func readLine(_ descriptor: Int32) throws(CgroupError) -> String {
        var bytes: [UInt8] = []
        var byte: UInt8 = 0
        while true {
            let count = read(descriptor, &byte, 1)
            if count < 0 && errno == EINTR { continue }
            guard count == 1 else { throw CgroupError(.unreadable, "the child closed its output (exited or was killed)") }
            if byte == UInt8(ascii: "\n") { return String(decoding: bytes, as: UTF8.self) }
            bytes.append(byte)
        }
    }
}

/// A process-wide counter.
final class AtomicCounter: Sendable {
    private let value = Synchronization.Atomic<Int>(0)
    func increment() -> Int { value.add(1, ordering: .relaxed).newValue }
}
