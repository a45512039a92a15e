import MemwarnSystem

/// Failures forced on the reads of kernel files, for tests: "fail the next N opens or reads of
/// the files whose path ends so, with this `errno`", as swift-system's mocking driver forces an
/// `errno` on its next calls. A test sets one on `faultPlan` (and so on a monitor's
/// `MonitorConfiguration.files`), then turns failures on and off while the monitor runs: the
/// transient-error handling is proven on plain files, without root and without exhausting the
/// process's descriptors or memory.
///
/// `read(_:)` and ``UsageFile`` (its `open` and each `pread`) consult it, and only
/// when one is set: `host` has none, so a read in production pays one `nil` check.
/// Thread-safe: the monitor's threads read through it while a test changes it.
package final class ReadFaultPlan: Sendable, Hashable {
    /// The step of a read that fails.
    package enum Step: Sendable, Hashable {
        /// Opening the file (`open`).
        case open
        /// Reading it (`read`, or `pread` on a descriptor held open).
        case read
    }

    /// One "fail these with this errno" rule.
    private struct Rule {
        var pathSuffix: String?
        var steps: Set<Step>
        var errno: Int32
        /// Failures still to force; `nil` until the rule is removed.
        var remaining: Int?

        func matches(_ step: Step, _ hostPath: String) -> Bool {
            steps.contains(step) && pathSuffix.map { hostPath.hasSuffix($0) } ?? true
        }
    }

    private struct State {
        var rules: [Rule] = []
        /// The failures forced so far, by host path.
        var forced: [String: Int] = [:]
    }

    private let state = Locked(State())

    /// A plan that forces nothing until told to.
    package init() {}

    /// Fails the next opens or reads of matching files with `errno`, after the rules already
    /// given have had theirs (the first rule that matches a read forces its failure).
    ///
    /// - Parameters:
    ///   - steps: which steps fail: opens, reads, or both (the default).
    ///   - pathSuffix: how the host path of a file to fail ends, such as `/memory.current`;
    ///     `nil` fails every file.
    ///   - errno: the `errno` the failing call leaves, such as `EMFILE` or `ENODEV`.
    ///   - times: how many failures to force; `nil` forces them until ``clear()``.
    package func fail(_ steps: Set<Step> = [.open, .read], of pathSuffix: String?, with errno: Int32, times: Int? = nil) {
        state.withLock { $0.rules.append(Rule(pathSuffix: pathSuffix, steps: steps, errno: errno, remaining: times)) }
    }

    /// Removes every rule: reads succeed again (the counts are kept).
    package func clear() {
        state.withLock { $0.rules = [] }
    }

    /// Whether a rule would still force a failure.
    package var isActive: Bool { state.withLock { !$0.rules.isEmpty } }

    /// How many failures were forced, on every file.
    package var forcedCount: Int { state.withLock { $0.forced.values.reduce(0, +) } }

    /// How many failures were forced on the files whose host path ends with `pathSuffix`.
    ///
    /// - Parameter pathSuffix: how the host path ends, such as `/memory.events`.
    /// - Returns: the failures forced on them.
    package func forcedCount(of pathSuffix: String) -> Int {
        state.withLock { $0.forced.filter { $0.key.hasSuffix(pathSuffix) }.values.reduce(0, +) }
    }

    /// The `errno` forced on this step of a read, counted, or `nil` to let the call run.
    ///
    /// - Parameters:
    ///   - step: the step about to run.
    ///   - hostPath: the file, as a path on the host.
    /// - Returns: the `errno` to fail with, or `nil`.
    package func forcedErrno(_ step: Step, of hostPath: String) -> Int32? {
        state.withLock { state in
            guard let index = state.rules.firstIndex(where: { $0.matches(step, hostPath) }) else { return nil }
            let errno = state.rules[index].errno
            if let remaining = state.rules[index].remaining {
                if remaining <= 1 { state.rules.remove(at: index) } else { state.rules[index].remaining = remaining - 1 }
            }
            state.forced[hostPath, default: 0] += 1
            return errno
        }
    }

    /// Throws the failure forced on this step, as the system call would have failed.
    ///
    /// - Parameters:
    ///   - step: the step about to run.
    ///   - hostPath: the file, as a path on the host (what rules match).
    ///   - realPath: the file as opened (what the error names).
    /// - Throws: `SystemError` of the call `open` or `read` with the forced `errno`.
    func check(_ step: Step, of hostPath: String, at realPath: String) throws(SystemError) {
        guard let errno = forcedErrno(step, of: hostPath) else { return }
        throw SystemError(step == .open ? "open" : "read", errno: errno, path: realPath)
    }

    /// Plans are the same only when they are one object: a copy of `KernelFiles` shares its plan.
    package static func == (lhs: ReadFaultPlan, rhs: ReadFaultPlan) -> Bool { lhs === rhs }

    /// Hashes the object's identity, as ``==(_:_:)`` compares it.
    package func hash(into hasher: inout Hasher) {
        hasher.combine(ObjectIdentifier(self))
    }
}
