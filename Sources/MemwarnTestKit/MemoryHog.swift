import CgroupKit
import MemwarnSystem

#if canImport(Glibc)
import Glibc
#endif

/// A running `memwarn-hog` child: a process that holds exactly as much touched anonymous memory
/// as it is told (`hold <bytes>` on its stdin, `held <bytes> <start ns> <end ns>` back).
///
/// Started outside any test cgroup, it holds nothing until told, so it can be moved into one
/// before it allocates (charges made before a move stay where they were): ``init(binary:)``
/// returns once it has started up and answered. Started in a cgroup (``init(in:binary:)``),
/// its own start-up is charged there too, and ``baselineBytes`` tells how much that was.
public final class MemoryHog: Sendable {
    private let child: LineChild
    /// The cgroup's usage once the hog runs holding nothing, when it was started in one: what
    /// the cgroup holds besides the hog's memory (the process itself, its stack and heap).
    public let baselineBytes: Int
    /// The hogs this process started and has not terminated, by pid.
    private static let started = Locked<[Int32: LineChild]>([:])

    /// The reply to a ``hold(_:)``.
    public struct Held: Sendable {
        /// The bytes now held (rounded up to pages).
        public var bytes: Int
        /// `CLOCK_MONOTONIC` nanoseconds just before the change and just after it.
        public var startNanoseconds: UInt64
        public var endNanoseconds: UInt64

        /// How long the change took, as the hog measured it.
        public var duration: Duration { .nanoseconds(Int64(endNanoseconds - startNanoseconds)) }
    }

    /// The child's pid.
    public var pid: Int32 { child.pid }

    /// The `memwarn-hog` binary: `MEMWARN_HOG` when set, else beside the running executable
    /// (SwiftPM puts test runners and products in the same folder).
    public static func binaryPath() -> String {
        if let path = getenv("MEMWARN_HOG") { return String(cString: path) }
        return ExecutablePath.sibling("memwarn-hog")
    }

    /// Starts a hog in this process's cgroup, holding nothing.
    ///
    /// - Throws: ``ChildProcessError`` when the binary is missing (build the package first) or
    ///   the hog does not answer.
    public convenience init(binary: String = MemoryHog.binaryPath()) throws(ChildProcessError) {
        try self.init(binary: binary, cgroup: nil)
    }

    /// Starts a hog inside `cgroup` (it joins between `fork` and `exec`), holding nothing, and
    /// measures ``baselineBytes``.
    ///
    /// - Throws: ``ChildProcessError`` as ``init(binary:)``, or when the usage cannot be read.
    public convenience init(in cgroup: TestCgroup, binary: String = MemoryHog.binaryPath()) throws(ChildProcessError) {
        try self.init(binary: binary, cgroup: cgroup)
    }

    /// Starts a hog inside `cgroup` with `arguments` (`--endpoint DIR hang|lie`: it also serves
    /// a misbehaving control endpoint), holding nothing.
    ///
    /// - Throws: ``ChildProcessError`` as ``init(binary:)``.
    public convenience init(in cgroup: TestCgroup, arguments: [String], binary: String = MemoryHog.binaryPath()) throws(ChildProcessError) {
        try self.init(binary: binary, cgroup: cgroup, arguments: arguments)
    }

    private init(binary: String, cgroup: TestCgroup?, arguments: [String] = []) throws(ChildProcessError) {
        guard access(binary, X_OK) == 0 else {
            throw ChildProcessError("memwarn-hog is not built at \(binary); run swift build first")
        }
        child = try LineChild([binary] + arguments, in: cgroup)
        Self.started.withLock { [child] in $0[child.pid] = child }
        _ = try Self.held(try Self.ask(child, 0, timeout: .seconds(60)), from: child)
        do {
            baselineBytes = try cgroup.map { (cgroup) throws in Int(try cgroup.usage()) } ?? 0
        } catch {
            throw ChildProcessError("the usage of \(cgroup?.location.directory ?? "?") could not be read: \(error)")
        }
    }

    /// Grows or shrinks to `bytes` of touched memory and waits until done.
    ///
    /// - Throws: ``ChildProcessError`` when the hog died (OOM-killed) or answered with an error.
    @discardableResult
    public func hold(_ bytes: Int, timeout: Duration = .seconds(60)) throws(ChildProcessError) -> Held {
        try Self.held(try Self.ask(child, max(0, bytes), timeout: timeout), from: child)
    }

    /// ``hold(_:timeout:)``, awaited (a throttled hog takes long).
    @discardableResult
    public func hold(_ bytes: Int, within limit: Duration) async throws(ChildProcessError) -> Held {
        try child.send("hold \(max(0, bytes))")
        return try Self.held(try await child.nextLine(within: limit), from: child)
    }

    /// Grows or shrinks so that `cgroup`'s usage is `fraction` of its limit, given the bytes
    /// the cgroup holds besides the hog's memory (measure them once, while the hog holds nothing).
    @discardableResult
    public func hold(_ fraction: Double, of cgroup: TestCgroup, besides overhead: Int) throws(ChildProcessError) -> Held {
        try hold(Int(Double(cgroup.limit) * fraction) - overhead)
    }

    /// Grows or shrinks, awaited, so that the usage of the cgroup it was started in is `fraction`
    /// of `limit` (0 lets go of everything).
    @discardableResult
    public func hold(_ fraction: Double, of limit: Int, within time: Duration = .seconds(120)) async throws(ChildProcessError) -> Held {
        try await hold(fraction == 0 ? 0 : Int(Double(limit) * fraction) - baselineBytes, within: time)
    }

    /// Asks it to hold `bytes` without waiting for the answer (for a hold that ends in an OOM kill).
    public func startHolding(_ bytes: Int) throws(ChildProcessError) {
        try child.send("hold \(bytes)")
    }

    /// Awaits its end: its exit status, or 128 + the signal (137 for an OOM kill).
    public func exitStatus(within limit: Duration = .seconds(60)) async throws(ChildProcessError) -> Int32 {
        try await child.exitStatus(within: limit)
    }

    private static func ask(_ child: LineChild, _ bytes: Int, timeout: Duration) throws(ChildProcessError) -> String {
        try child.send("hold \(bytes)")
        return try child.nextLine(timeout: timeout)
    }

    private static func held(_ reply: String, from child: LineChild) throws(ChildProcessError) -> Held {
        let words = reply.split(separator: " ")
        guard words.count == 4, words[0] == "held", let held = Int(words[1]), let start = UInt64(words[2]), let end = UInt64(words[3]) else {
            throw ChildProcessError("the hog (pid \(child.pid)) answered \"\(reply)\"")
        }
        return Held(bytes: held, startNanoseconds: start, endNanoseconds: end)
    }

    /// Kills the hog (SIGKILL) and waits until it is reaped. Safe to call twice.
    public func terminate() {
        guard Self.started.withLock({ $0.removeValue(forKey: child.pid) != nil }) else { return }
        child.killIfRunning()
        _ = try? child.waitForExit(timeout: .seconds(60))
    }

    /// Ends it gracefully, awaited: closes its input and waits; kills it if it does not go.
    public func stop() async {
        child.closeInput()
        if (try? await child.exitStatus(within: .seconds(10))) == nil { child.killIfRunning() }
        _ = Self.started.withLock { $0.removeValue(forKey: child.pid) }
    }

    /// Kills and reaps every hog this process started that is in `cgroup`.
    public static func terminateAll(in cgroup: TestCgroup) {
        let inside = Set((try? cgroup.processes()) ?? [])
        let mine = started.withLock { started in
            let mine = started.filter { inside.contains($0.key) }
            for pid in mine.keys { started[pid] = nil }
            return mine.values
        }
        for child in mine {
            child.killIfRunning()  // by its waiter, which knows whether the pid is still the hog's
            _ = try? child.waitForExit(timeout: .seconds(60))
        }
    }

    deinit {
        terminate()
    }
}
