public import CgroupKit
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
    /// The outcome of ``run(_:environment:)``.
    public struct Finished: Sendable {
        /// The exit status, or 128 + the signal for a killed process.
        public var status: Int32
        public var standardOutput: String
        public var standardError: String
    }

    /// Runs a command to its end with no input, capturing its output and error streams.
    public static func run(_ arguments: [String], environment: [String]? = nil) throws(CgroupError) -> Finished {
        var errorPipe: [Int32] = [0, 0]
        guard pipe(&errorPipe) == 0 else { throw CgroupError(.unsupported, "pipe failed") }
        for descriptor in errorPipe { _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC) }
        // The child's stderr is set in the spawn's file actions: swapping this process's own
        // fd 2 would catch whatever other threads print meanwhile (and hand it to their children).
        let spawned = Result { () throws(CgroupError) in try spawn(arguments, environment: environment, standardError: errorPipe[1]) }
        close(errorPipe[1])
        let (pid, input, output) = try spawned.get()
        close(input)
        let standardOutput = readAll(output)
        let standardError = readAll(errorPipe[0])
        close(output)
        close(errorPipe[0])
        return Finished(status: wait(pid), standardOutput: standardOutput, standardError: standardError)
    }

    /// ``run(_:environment:)`` on a thread of its own, so a command that takes seconds never
    /// holds one of the few threads Swift's tasks run on (other suites' tasks would starve).
    public static func runOffThePool(_ arguments: [String], environment: [String]? = nil) async throws -> Finished {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Finished, any Error>) in
            var thread = pthread_t()
            let box = Unmanaged.passRetained(RunRequest(arguments: arguments, environment: environment, continuation: continuation))
            let started = pthread_create(&thread, nil, { context in
                let request = Unmanaged<RunRequest>.fromOpaque(context!).takeRetainedValue()
                request.continuation.resume(with: Result { () throws(CgroupError) in try ChildProcess.run(request.arguments, environment: request.environment) })
                return nil
            }, box.toOpaque())
            if started == 0 {
                pthread_detach(thread)
            } else {
                box.release()
                continuation.resume(throwing: CgroupError(.unsupported, "pthread_create failed: \(started)"))
            }
        }
    }

    private final class RunRequest: @unchecked Sendable {
        // @unchecked: handed to exactly one thread, which owns it from then on.
        let arguments: [String]
        let environment: [String]?
        let continuation: CheckedContinuation<Finished, any Error>
        init(arguments: [String], environment: [String]?, continuation: CheckedContinuation<Finished, any Error>) {
            (self.arguments, self.environment, self.continuation) = (arguments, environment, continuation)
        }
    }

    /// Waits for a child and returns its exit status, or 128 + signal.
    public static func wait(_ pid: Int32) -> Int32 {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let signal = status & 0x7f
        return signal == 0 ? (status >> 8) & 0xff : 128 + signal
    }

    static func readAll(_ descriptor: Int32) -> String {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { break }
            bytes += chunk[0..<count]
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Spawns `arguments` with its stdin and stdout connected to pipes; stderr is inherited, or
    /// goes to `standardError` when given.
    ///
    /// - Returns: the pid, the write end of its stdin and the read end of its stdout.
    public static func spawn(_ arguments: [String], environment: [String]? = nil,
                             standardError: Int32? = nil) throws(CgroupError) -> (pid: Int32, input: Int32, output: Int32) {
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
        if let standardError { posix_spawn_file_actions_adddup2(&actions, standardError, 2) }
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

    /// Reads one line (without its newline) from a pipe, blocking, for at most `timeout`
    /// (a bound against a hung child, not a measurement).
    ///
    /// - Throws: ``CgroupError`` `.unreadable` at end of file (the child exited) or when no
    ///   line came within `timeout`.
    public static func readLine(_ descriptor: Int32, timeout: Duration = .seconds(60)) throws(CgroupError) -> String {
        var bytes: [UInt8] = []
        var byte: UInt8 = 0
        let deadline = ContinuousClock.now + timeout
        while true {
            let left = deadline - .now
            let (seconds, attoseconds) = left.components
            var descriptors = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            let ready = poll(&descriptors, 1, left <= .zero ? 0 : Int32(clamping: seconds * 1_000 + attoseconds / 1_000_000_000_000_000 + 1))
            if ready < 0 && errno == EINTR { continue }
            guard ready > 0 else {
                throw CgroupError(.unreadable, "no line from the child within \(timeout) (read so far: \"\(String(decoding: bytes, as: UTF8.self))\")")
            }
            let count = read(descriptor, &byte, 1)
            if count < 0 && errno == EINTR { continue }
            guard count == 1 else { throw CgroupError(.unreadable, "the child closed its output (exited or was killed)") }
            if byte == UInt8(ascii: "\n") { return String(decoding: bytes, as: UTF8.self) }
            bytes.append(byte)
        }
    }
}
