import MemwarnSystem

/// When memory counts as tight: the marks, the hysteresis and how signals are watched.
///
/// The defaults are those of `Config/memwarn.conf`; ``PressurePolicy/load(file:environment:)``
/// reads that format and `MEMWARN_*` environment overrides.
public struct PressurePolicy: Sendable, Hashable {
    /// Usage at or above this share of the effective limit raises `.warning`.
    public var warningRatio: Double = 0.80
    /// Usage at or above this share of the effective limit raises `.critical`. A value above 1
    /// (up to 2) turns usage-based critical off: only OOM, pressure and PSI signals raise it.
    public var criticalRatio: Double = 0.90
    /// Usage must fall below this share before the level returns to `.normal` (hysteresis).
    public var recoveryRatio: Double = 0.70
    /// PSI `some` avg10 at or above this percentage raises `.warning`; also the threshold of
    /// the `some` PSI trigger (this share of ``psiWindow``).
    public var psiSomeWarningPercent: Double = 10
    /// PSI `full` avg10 at or above this percentage raises `.critical`; also the threshold of
    /// the `full` PSI trigger.
    public var psiFullCriticalPercent: Double = 5
    /// The PSI trigger window. Without `CAP_SYS_RESOURCE` the kernel accepts only multiples
    /// of 2 s, so it is rounded up to one.
    public var psiWindow: Duration = .seconds(2)
    /// How long a lower level must hold before the monitor steps down. Escalation is immediate.
    public var holdTime: Duration = .seconds(2)
    /// How often the monitor re-reads while the level is raised, to find the way down.
    public var recheckInterval: Duration = .seconds(1)
    /// The longest wait between two readings of usage where the kernel sends no usage events
    /// (cgroup v2, a cgroup v1 monitor not run as root, a host without a limit), and the period
    /// of PSI's sampling fallback where a trigger cannot be registered. Adaptive sampling
    /// (``worstCaseGrowthBytesPerSecond``) reads sooner wherever usage could reach a mark sooner.
    public var pollInterval: Duration = .seconds(1)
    /// The growth rate adaptive sampling defends against, in bytes a second: where usage is
    /// sampled, the next reading is due when usage, growing this fast (or as fast as it was
    /// measured growing, if faster), could first reach the next mark — never sooner than 5 ms,
    /// never later than ``pollInterval``. Near a mark it reads every few milliseconds; far below
    /// the marks it barely reads. The default, 1 GiB/s, is above the fastest growth the project's
    /// growth benchmark drives (800 MiB/s, which it survives). `0` turns adaptive sampling off: usage is then read every ``pollInterval``.
    public var worstCaseGrowthBytesPerSecond: UInt64 = 1 << 30
    /// Whether the limits of the cgroup's ancestors count (`ancestor_limits = watch`, the
    /// default): each limited ancestor's usage (which counts every sibling) is read against its
    /// limit, and the level comes from the limit with the least headroom. `ignore` reads the
    /// cgroup's own limit alone: for a service whose parent's pressure is someone else's to
    /// handle. A node agent that coordinates a parent (`memwarn agent`) takes that parent out for
    /// as long as it runs, whatever this says.
    public var countsAncestorLimits = true
    /// Whether inactive page cache counts as usage (`inactive_page_cache = count`, the default).
    /// `ignore` measures every limit against usage less the cgroup's inactive file pages
    /// (`memory.stat`'s `total_inactive_file` on cgroup v1, `inactive_file` on v2): the working
    /// set, as the kubelet measures it. Those pages are files read or written and not used lately;
    /// at the limit the kernel reclaims them first (clean ones at once, dirty ones once written
    /// back), so a service that reads or writes files stops releasing its caches, at the usage
    /// marks, to make room for pages the kernel would drop anyway. PSI and v1's
    /// `memory.pressure_level` still raise the level when that reclaim stalls the service. The price: `memory.stat` is read beside each usage file, and on
    /// cgroup v1 as root usage is sampled by the rule wherever the page cache hides a mark (usage
    /// with it past the mark's guard band, usage less it below), since the kernel's usage
    /// thresholds count the page cache. The article "Levels and policy" says when to choose it.
    public var countsInactivePageCache = true
    /// The quiet time after a v1 `memory.pressure_level` notification before the next one
    /// is listened to (the kernel sends tens of thousands a second under thrash).
    public var pressureLevelQuietTime: Duration = .milliseconds(100)
    /// How far ahead the growth forecast looks: when usage, growing as measured, would reach the
    /// critical mark within this time, the monitor raises `.warning` (source `forecast`) before
    /// the warning mark is crossed. `0s` turns the forecast off (it is still reported).
    public var forecastHorizon: Duration = .seconds(30)
    /// The span of recent readings the growth rate is fitted over (a least-squares line through
    /// usage, with the bytes memwarn's own releases gave back added in, so a release does not
    /// read as a fall).
    public var growthWindow: Duration = .seconds(10)
    /// How often the proactive trim takes a step; `0s` (the default) turns it off.
    ///
    /// While memory is calm the trim lowers the ceiling of each
    /// ``/MemwarnRelease/TrimmableConsumer`` (a `DiscardableCache`) by ``trimStepPercent`` of what it
    /// holds, one step an interval, and gives two steps back, then waits ten intervals (twice as
    /// long after each step down in a row that refills answer at once, up to 320), when the
    /// consumer's refills rise. It never goes below what a consumer says is in use. The article
    /// "Trimming before a limit" says what it reads and what it costs.
    public var trimInterval: Duration = .zero
    /// The share of a consumer's footprint one trim step takes, in percent (default 1).
    public var trimStepPercent: Double = 1
    /// PSI `some` avg10 at or above this percentage holds the trim (default 1): memory stalls
    /// mean the service is already short, and a trim would add to them.
    public var trimStallPercent: Double = 1

    /// The default policy.
    public init() {}

    /// Checks that the marks are ordered and the durations sensible.
    ///
    /// - Throws: ``PolicyError`` naming the first setting that is out of range.
    public func validate() throws(PolicyError) {
        guard 0 < recoveryRatio, recoveryRatio <= warningRatio, warningRatio <= criticalRatio, warningRatio <= 1, criticalRatio <= 2 else {
            throw PolicyError(
                .inconsistent,
                "ratios must satisfy 0 < recovery_ratio (\(recoveryRatio)) <= warning_ratio (\(warningRatio)) <= 1 and warning_ratio <= critical_ratio (\(criticalRatio)) <= 2"
            )
        }
        guard (0...100).contains(psiSomeWarningPercent), (0...100).contains(psiFullCriticalPercent) else {
            throw PolicyError(.inconsistent, "PSI percentages must be within 0...100")
        }
        for (name, value) in [("psi_window", psiWindow), ("recheck_interval", recheckInterval), ("poll_interval", pollInterval)] where value < .milliseconds(10)
        {
            throw PolicyError(.inconsistent, "\(name) must be at least 10ms, is \(value)")
        }
        guard holdTime >= .zero, pressureLevelQuietTime >= .zero, forecastHorizon >= .zero else {
            throw PolicyError(.inconsistent, "durations must not be negative")
        }
        guard growthWindow >= .seconds(1), growthWindow <= .seconds(300) else {
            throw PolicyError(.inconsistent, "growth_window must be within 1s...300s, is \(growthWindow)")
        }
        guard forecastHorizon <= .seconds(3600) else { throw PolicyError(.inconsistent, "forecast_horizon must be at most 1h, is \(forecastHorizon)") }
        guard worstCaseGrowthBytesPerSecond == 0 || (1 << 20...1 << 40).contains(worstCaseGrowthBytesPerSecond) else {
            throw PolicyError(
                .inconsistent, "worst_case_growth must be 0 (adaptive sampling off) or within 1M/s...1T/s, is \(worstCaseGrowthBytesPerSecond) bytes/s")
        }
        guard trimInterval == .zero || (.milliseconds(100)...(.seconds(3600))).contains(trimInterval) else {
            throw PolicyError(.inconsistent, "trim_interval must be 0s (no trim) or within 100ms...1h, is \(trimInterval)")
        }
        guard trimStepPercent > 0, trimStepPercent <= 50, trimStallPercent > 0, trimStallPercent <= 100 else {
            throw PolicyError(
                .inconsistent,
                "trim_step_percent must be within 0...50 and trim_stall_percent within 0...100 (both above 0), are \(trimStepPercent) and \(trimStallPercent)")
        }
        guard psiWindow <= .seconds(10) else { throw PolicyError(.inconsistent, "psi_window must be at most 10s (the kernel's limit), is \(psiWindow)") }
    }
}

/// A policy file or override that cannot be used.
///
/// Match on ``code`` to handle a kind of failure (new codes may be added); ``message`` names
/// the file, line and key, and ``file`` and ``line`` where it was thrown. Two errors are equal
/// when their code and message are, wherever they were thrown.
public struct PolicyError: Error, Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The kind of failure.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private enum Base: String, Sendable, Hashable {
            case unreadableFile, notASetting, unknownKey, badValue, inconsistent
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// The policy file is missing, unreadable, or not a regular file.
        public static let unreadableFile = Code(.unreadableFile)
        /// A line of the file is not `key = value`.
        public static let notASetting = Code(.notASetting)
        /// A key the policy does not have.
        public static let unknownKey = Code(.unknownKey)
        /// A value that is not of its key's kind (a number, a duration, a rate, `watch` or
        /// `ignore`).
        public static let badValue = Code(.badValue)
        /// Values each of their kind that do not make a policy together, or one out of its
        /// range (the marks out of order, a window beyond the kernel's limit).
        public static let inconsistent = Code(.inconsistent)

        public var description: String { base.rawValue }
    }

    /// The fields, their description and their equality (shared with the package's other errors).
    private var backing: ErrorBacking<Code>

    /// The kind of failure.
    public var code: Code {
        get { backing.code }
        set { backing.code = newValue }
    }
    /// What is wrong, naming the file, line and key.
    public var message: String {
        get { backing.message }
        set { backing.message = newValue }
    }
    /// The source file that threw it (`#fileID`).
    public var file: String {
        get { backing.file }
        set { backing.file = newValue }
    }
    /// The line that threw it.
    public var line: Int {
        get { backing.line }
        set { backing.line = newValue }
    }

    /// Creates an error.
    ///
    /// - Parameters:
    ///   - code: the kind of failure.
    ///   - message: what is wrong, naming the file, line and key.
    ///   - file: where it is thrown; the default is the caller's.
    ///   - line: where it is thrown; the default is the caller's.
    package init(_ code: Code, _ message: String, file: String = #fileID, line: Int = #line) {
        backing = ErrorBacking(code, message, file: file, line: line)
    }

    /// The message.
    public var description: String { backing.description }

    /// The message, the code and where it was thrown.
    public var debugDescription: String { backing.debugDescription }

    public static func == (lhs: PolicyError, rhs: PolicyError) -> Bool { lhs.backing == rhs.backing }

    public func hash(into hasher: inout Hasher) { hasher.combine(backing) }
}
