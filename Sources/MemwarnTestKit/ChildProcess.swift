import MemwarnSystem

#if canImport(Glibc)
import Glibc
#endif

/// Commands run to their end, and where the harness finds the products it runs.
public enum ChildProcess {
    /// The outcome of ``run(_:environment:in:timeout:)``.
    public struct Finished: Sendable {
        /// The exit status, or 128 + the signal for a killed process.
        public var status: Int32
        public var standardOutput: String
        public var standardError: String
    }

    /// The folder of the running executable, where SwiftPM puts the test runner and the
    /// products (`memwarn`, `memwarn-hog`, the probes).
    public static var productsDirectory: String { ExecutablePath.productsDirectory }

    /// The words that run a command as nobody (uid and gid 65534, no supplementary groups):
    /// `setpriv`, from util-linux. Put in front of a command to try it as an ordinary user, who
    /// may not register cgroup v1 notifications or write other users' files.
    public static let asNobody = ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]

    /// `CLOCK_MONOTONIC` now, in nanoseconds: the clock `memwarn-hog` and the growth probe stamp
    /// their replies with, comparable across processes.
    public static func monotonicNanoseconds() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
    }

    /// The running executable's path (`/proc/self/exe`), to start it again; `nil` when it
    /// cannot be read.
    public static var runningExecutable: String? { ExecutablePath.running }

    /// Runs a command to its end with no input, capturing its output and error, blocking the
    /// calling thread (for a short command; ``runOffThePool(_:environment:in:timeout:)`` for a
    /// long one).
    ///
    /// - Throws: ``ChildProcessError`` when it cannot start, or runs longer than `timeout`
    ///   (it is killed then).
    public static func run(
        _ arguments: [String], environment: [String]? = nil, in cgroup: TestCgroup? = nil,
        timeout: Duration = .seconds(300)
    ) throws(ChildProcessError) -> Finished {
        let child = try LineChild(arguments, in: cgroup, environment: environment)
        child.closeInput()
        let status = try child.waitForExit(timeout: timeout)
        try child.waitForOutputEnd(timeout: .seconds(10))
        return Finished(status: status, standardOutput: child.standardOutputText, standardError: child.standardErrorText)
    }

    /// ``run(_:environment:in:timeout:)``, awaited: no thread of Swift's pool is held while the
    /// command runs (other suites' tasks would starve).
    ///
    /// - Throws: ``ChildProcessError`` when it cannot start, or runs longer than `timeout`.
    public static func runOffThePool(
        _ arguments: [String], environment: [String]? = nil, in cgroup: TestCgroup? = nil,
        timeout: Duration = .seconds(300)
    ) async throws(ChildProcessError) -> Finished {
        let child = try LineChild(arguments, in: cgroup, environment: environment)
        child.closeInput()
        let status = try await child.exitStatus(within: timeout)
        await child.outputEnded(within: .seconds(10))
        return Finished(status: status, standardOutput: child.standardOutputText, standardError: child.standardErrorText)
    }
}
