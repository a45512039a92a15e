import CgroupKit

/// One limit's usage as ``UsageSampling`` reads it: the usage file of the cgroup that sets the
/// limit (the watched cgroup's, a limited ancestor's, or `/proc/meminfo` when no limit applies),
/// the marks in bytes of that limit, and what the readings so far say (where usage stands among
/// the thresholds, how fast it moves, whether a guard band is being watched). Loop thread only.
final class UsageGauge {
    /// The constraint it follows: `<cgroup path>|<limit file>`, or `system`.
    let key: String
    /// The constraint it follows, as its parts (`nil`: the system's memory): compared at every
    /// full reading without building the key.
    let constraint: (cgroupPath: String, limitFile: String)?
    let file: UsageFile
    /// The `memory.stat` line of the cgroup's inactive page cache, read beside ``file`` and taken
    /// off its usage when the policy leaves inactive page cache out (`nil` when it counts).
    let inactiveFile: UsageFile?
    /// Whether the kernel reports this usage's crossings (cgroup v1 thresholds registered on it):
    /// then it is read only inside the guard bands below the marks. When page cache is left out
    /// (``inactiveFile``), the kernel's thresholds count it. Usage less the page cache is never
    /// above usage with it, so while usage with it is below a mark's guard bands, the kernel
    /// reports it rising into them first, and the thresholds still stand in for reads; the guard
    /// bands read are those of usage less the page cache. Where the page cache hides a mark (usage
    /// with it at or past the mark's guard bands, usage less it below them, or no reading yet
    /// says how much page cache there is), usage less it can reach the mark while usage with it
    /// crosses nothing (anonymous memory taking the place of page cache the kernel reclaims at
    /// the limit): it is read by the rule there. A fall, page cache taking the place of anonymous
    /// memory at the limit, is not read for: while the level is raised the monitor's recheck
    /// (every `recheck_interval`) finds it.
    private(set) var isGuarded = false

    private let processors: Int

    /// Whether it follows this constraint (`nil`: the system's memory).
    func follows(_ other: MemoryConstraint?) -> Bool {
        guard let constraint, let other else { return constraint == nil && other == nil }
        return constraint.cgroupPath == other.cgroupPath && constraint.limitFile == other.limit.file
    }
    private(set) var capacity: UInt64?
    private var thresholds: [UInt64] = []
    /// Recovery, warning, critical (bytes, ascending): where a fall matters; also the guard bands' tops.
    private(set) var levelMarks: [UInt64] = []
    /// Warning, critical, the limit (bytes, ascending): where a rise matters.
    private(set) var marksAbove: [UInt64] = []
    private var band: UInt64 = 0
    /// How far below a threshold usage must fall before the fall counts as a crossing (1 % of
    /// the capacity): usage wavering on a threshold costs reads, not full readings.
    private var slack: UInt64 = 0

    private(set) var last: (usage: UInt64, at: ContinuousClock.Instant)?
    /// Usage with the inactive page cache at the last reading, where it is left out (``inactiveFile``).
    private var lastWithPageCache: UInt64?
    private var position = 0
    private(set) var rising = 0.0
    private(set) var falling = 0.0
    /// Guarded: a crossing one read saw, which the kernel has not reported yet.
    private var unconfirmedCrossing = false

    init(constraint: (cgroupPath: String, limitFile: String)?, file: UsageFile, inactiveFile: UsageFile? = nil, processors: Int) {
        self.constraint = constraint
        key = constraint.map { $0.cgroupPath + "|" + $0.limitFile } ?? "system"
        self.file = file
        self.inactiveFile = inactiveFile
        self.processors = processors
    }

    /// Takes in a full reading of this limit: its capacity (a new one moves every mark), usage, and
    /// the inactive page cache left out of it (`nil` when counted).
    func observe(usage: UInt64, inactiveFileBytes: UInt64? = nil, capacity: UInt64, policy: PressurePolicy, at now: ContinuousClock.Instant) {
        if capacity != self.capacity { plan(capacity: capacity, policy: policy) }
        lastWithPageCache = inactiveFileBytes.map { usage + $0 }
        record(usage, at: now)
        position = thresholds.count(where: { $0 <= usage })
        unconfirmedCrossing = false
    }

    /// Sampling by the rule from now on (the kernel's thresholds on it are gone).
    func sampleContinuously() {
        isGuarded = false
        unconfirmedCrossing = false
    }

    /// Sampling in the guard bands from now on.
    func guardFromNow() {
        isGuarded = true
        unconfirmedCrossing = false
    }

    private func plan(capacity: UInt64, policy: PressurePolicy) {
        self.capacity = capacity
        let marks = LevelMarks(policy: policy, capacityBytes: capacity)
        thresholds = marks.thresholdBytes
        levelMarks = marks.levelMarkBytes
        marksAbove = marks.marksAboveBytes
        band = marks.guardBandBytes(processors: processors)
        slack = capacity / 100
    }

    /// The wait before this gauge's next read, or `nil` for none until the next full reading
    /// (guarded, outside every band).
    func nextWait(rule: SamplingRule) -> Duration? {
        guard let usage = last?.usage else { return nil }
        if !isGuarded {
            return rule.interval(
                usage: usage, marksAbove: marksAbove, marksBelow: levelMarks, risingBytesPerSecond: rising,
                fallingBytesPerSecond: falling)
        }
        if unconfirmedCrossing { return SamplingRule.shortestInterval }
        if inactiveFile != nil,
            lastWithPageCache.map({ withPageCache in levelMarks.contains { usage + 2 * band < $0 && withPageCache + 2 * band >= $0 } }) ?? true
        {
            // Page cache left out hides a mark: usage with it is at or past the mark's guard, so the
            // kernel's thresholds will not report usage less it reaching the mark.
            return rule.interval(
                usage: usage, marksAbove: marksAbove, marksBelow: levelMarks, risingBytesPerSecond: rising, fallingBytesPerSecond: falling)
        }
        // Two band widths, not one: once the kernel has reported its guard crossed, it does not
        // report the guard again (what starts this sampling) until one of its checks sees usage
        // back under it. A reading a little under the guard (usage fell back by a few pages, or
        // a CPU's charge stock was drained, after the kernel's check) leaves the guard "crossed"
        // in the kernel, so a small step back up and across the mark, which the kernel's checks
        // can miss, would also go unsampled.
        guard let mark = levelMarks.first(where: { usage < $0 && usage + 2 * band >= $0 }) else { return nil }
        return rule.guardInterval(distance: mark - usage, risingBytesPerSecond: rising)
    }

    /// Reads usage now.
    ///
    /// - Returns: whether usage crossed a threshold (up across one, or down below one by the
    ///   slack) — beside the kernel's thresholds only once a second read, a floor interval later,
    ///   still sees it (the kernel reports its own in 0.1-3 ms, and its full reading moves the
    ///   position, so only a crossing it did not report counts here).
    /// - Throws: CgroupKit's `CgroupError` when the file cannot be read.
    func read(at now: ContinuousClock.Instant) throws(CgroupError) -> Bool {
        var usage = try file.read()
        if let inactiveFile {
            lastWithPageCache = usage
            usage -= min(usage, try inactiveFile.read())
        }
        record(usage, at: now)
        let crossed = thresholds.count(where: { $0 <= usage })
        let fell = thresholds.count(where: { $0 <= usage + slack }) < position
        guard crossed > position || fell else {
            unconfirmedCrossing = false
            return false
        }
        // The kernel's thresholds report usage with the page cache, never usage less it.
        if isGuarded && inactiveFile == nil && !unconfirmedCrossing {
            unconfirmedCrossing = true
            return false
        }
        unconfirmedCrossing = false
        position = crossed
        return true
    }

    /// Notes a reading, and how fast usage rose or fell since the last one (readings less than a
    /// millisecond apart keep the rates they had).
    private func record(_ usage: UInt64, at now: ContinuousClock.Instant) {
        defer { last = (usage, now) }
        guard let last else { return }
        let seconds = (now - last.at).seconds
        guard seconds >= 0.001 else { return }
        let rate = (Double(usage) - Double(last.usage)) / seconds
        (rising, falling) = (max(0, rate), max(0, -rate))
    }
}
