public import CgroupKit
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A running `memwarn-hog` child: a process that holds as much memory as it is told.
///
/// It starts holding nothing and waits for commands, so it can be moved into a cgroup before
/// it allocates anything (charges made before a move stay where they were).
public final class MemoryHog: Sendable {
    /// The child's pid.
    public let pid: Int32
    private let input: Int32
    private let output: Int32
    private static let started = Mutex<Set<Int32>>([])

    /// The reply to a ``hold(_:)``.
    public struct Held: Sendable {
        /// The bytes now held (rounded up to pages).
        public var bytes: Int
        /// `CLOCK_MONOTONIC` nanoseconds just before the change and just after it.
        public var startNanoseconds: UInt64
        public var endNanoseconds: UInt64
    }

    /// The `memwarn-hog` binary: `MEMWARN_HOG` when set, else beside the running executable
    /// (SwiftPM puts test runners and products in the same folder).
    public static func binaryPath() -> String {
        if let path = getenv("MEMWARN_HOG") { return String(cString: path) }
        return ProductsDirectory.path + "/memwarn-hog"
    }

    /// Starts a hog.
    ///
    /// - Throws: ``CgroupError`` `.notFound` when the binary is missing (build the package first).
    public init(binary: String = MemoryHog.binaryPath()) throws(CgroupError) {
        guard access(binary, X_OK) == 0 else {
            throw CgroupError(.notFound, "memwarn-hog is not built; run swift build first", path: binary)
        }
        let (pid, input, output) = try ChildProcess.spawn([binary])
        self.pid = pid
        self.input = input
        self.output = output
        Self.started.withLock { _ = $0.insert(pid) }
        // Wait until the hog has started and answered once (holding nothing): what it touches
        // while loading its libraries is charged where it runs now, never to the cgroup it is
        // moved into next.
        try hold(0)
    }

    /// Grows or shrinks to `bytes` of touched memory and waits until done.
    ///
    /// - Throws: ``CgroupError`` when the hog died (OOM-killed) or answered with an error.
    @discardableResult
    public func hold(_ bytes: Int) throws(CgroupError) -> Held {
        let command = Array("hold \(bytes)\n".utf8)
        guard command.withUnsafeBytes({ write(input, $0.baseAddress, $0.count) }) == command.count else {
            throw CgroupError(.unwritable, "the hog (pid \(pid)) is gone: \(String(cString: strerror(errno)))")
        }
        let reply = try ChildProcess.readLine(output)
        let words = reply.split(separator: " ")
        guard words.count == 4, words[0] == "held", let held = Int(words[1]), let start = UInt64(words[2]), let end = UInt64(words[3]) else {
            throw CgroupError(.malformed, "the hog (pid \(pid)) answered \"\(reply)\"")
        }
        return Held(bytes: held, startNanoseconds: start, endNanoseconds: end)
    }

    /// Grows or shrinks so that `cgroup`'s usage is `fraction` of its limit, given the bytes
    /// the cgroup holds besides the hog's memory (measure them once, while the hog holds nothing).
    @discardableResult
    public func hold(_ fraction: Double, of cgroup: TestCgroup, besides overhead: Int) throws(CgroupError) -> Held {
        try hold(Int(Double(cgroup.limit) * fraction) - overhead)
    }

    /// Kills the hog (SIGKILL) and reaps it. Safe to call twice.
    public func terminate() {
        let owned = Self.started.withLock { $0.remove(pid) != nil }
        guard owned else { return }
        kill(pid, SIGKILL)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    }

    /// Kills and reaps every hog this process started that is in `cgroup`.
    public static func terminateAll(in cgroup: TestCgroup) {
        let inside = Set((try? cgroup.processes()) ?? [])
        let mine = started.withLock { $0.intersection(inside) }
        for pid in mine {
            started.withLock { _ = $0.remove(pid) }
            kill(pid, SIGKILL)
            var status: Int32 = 0
            while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        }
    }

    deinit {
        terminate()
        close(input)
        close(output)
    }
}
