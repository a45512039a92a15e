import CgroupKit
import MemwarnSystem
#if canImport(Glibc)
import Glibc
#endif

/// Usage read where the kernel sends no usage events, at the times ``SamplingRule`` sets: one
/// `pread` of one small file on a descriptor held open (``UsageFile``), compared with the
/// thresholds the kernel would have reported on cgroup v1 (the recovery, warning and critical
/// marks and every 5 % of the limit from half of it up). A reading that crosses one wakes the
/// monitor (signal ``PressureSignal/usageSample``), which then reads every file as after a
/// kernel event; the others cost one read and are forgotten.
///
/// Two modes:
/// - **continuous** (cgroup v2, a v1 cgroup whose notifications this user may not register, a
///   host without a limit): always scheduled, by the rule; it also asks for a full reading
///   (signal ``PressureSignal/poll``) once a ``PressurePolicy/pollInterval`` has passed without
///   one, so the limit, PSI and the growth estimate stay current.
/// - **guarded** (cgroup v1 as root, beside the kernel's usage thresholds): scheduled only while
///   usage sits in the guard band below a level mark, to find a crossing the kernel did not
///   report; a crossing wakes the monitor once a second read confirms the kernel left it unreported.
///
/// Not a ``PressureSource``: it has no descriptor to watch and no period; the engine tells it
/// each full reading (``observe(_:at:)``), asks it when to read next (``nextRead(after:)``) and has
/// it read (``sample(at:)``). Loop thread only.
final class UsageSampling {
    enum Mode {
        case continuous
        case guarded
    }

    private(set) var mode: Mode
    let rule: SamplingRule
    private(set) var description: String
    private let file: String
    private let policy: PressurePolicy
    private let files: KernelFiles
    private let processors: Int
    /// The memory cgroup's usage file, or `nil` without a memory controller.
    private let cgroupFile: UsageFile?
    /// `/proc/meminfo`, opened once no limit applies (usage is the system's then).
    private var meminfo: UsageFile?

    // From the latest full reading; the marks are recomputed only when the capacity changes.
    private var measuresSystem = false
    private var capacity: UInt64?
    private var thresholds: [UInt64] = []
    /// Recovery, warning, critical (bytes, ascending): where a fall matters; also the guard bands' tops.
    private var levelMarks: [UInt64] = []
    /// Warning, critical, the limit (bytes, ascending): where a rise matters.
    private var marksAbove: [UInt64] = []
    private var band: UInt64 = 0
    /// How far below a threshold usage must fall before the fall counts as a crossing (1 % of
    /// the capacity): usage wavering on a threshold costs reads, not full readings.
    private var slack: UInt64 = 0
    private var lastFullReading: ContinuousClock.Instant?

    // From the latest reading of either kind.
    private var last: (usage: UInt64, at: ContinuousClock.Instant)?
    private var position = 0
    private var rising = 0.0
    private var falling = 0.0
    private var changed = true
    private var guardWait: Duration?
    /// Guarded mode: a crossing one read saw, which the kernel has not reported yet.
    private var unconfirmedCrossing = false
    /// Guarded mode: usage was inside a band at the last read. Sampling goes on until usage is a
    /// second band's width below the mark: a fall out of the band by a few unchecked pages leaves
    /// the kernel's guard "crossed", and it would not report usage coming back.
    private var guarding = false

    /// The wait chosen before the next read: how late a change of usage can be seen.
    private(set) var currentInterval: Duration

    /// Opens the usage file.
    ///
    /// - Parameters:
    ///   - cgroup: the memory cgroup, or `nil` without a memory controller (`/proc/meminfo` then).
    ///   - measuresSystem: whether usage is measured against the system (no limit applies).
    ///   - mode: continuous or guarded.
    ///   - reason: why usage is sampled, for ``description``.
    /// - Throws: ``CgroupError`` when the usage file cannot be opened.
    init(cgroup: CgroupLocation?, measuresSystem: Bool, mode: Mode, policy: PressurePolicy, files: KernelFiles,
         because reason: String) throws(CgroupError) {
        self.mode = mode
        self.policy = policy
        self.files = files
        rule = SamplingRule(policy: policy)
        processors = max(1, sysconf(Int32(_SC_NPROCESSORS_ONLN)))
        cgroupFile = try cgroup.map { (location) throws(CgroupError) in
            try UsageFile(location.file(CgroupMemoryReader(location: location, files: files).usageFile), format: .bytes, files: files)
        }
        self.measuresSystem = measuresSystem || cgroup == nil
        if self.measuresSystem { meminfo = try UsageFile("/proc/meminfo", format: .meminfo, files: files) }
        currentInterval = rule.longestInterval
        file = self.measuresSystem ? "/proc/meminfo" : cgroupFile?.hostPath ?? "/proc/meminfo"
        description = ""
        description = describe(because: reason)
    }

    private func describe(because reason: String) -> String {
        switch mode {
        case .continuous where rule.isAdaptive:
            "sample \(file) adaptively: every \(text(rule.floor)) to \(text(rule.longestInterval)), as soon as usage growing at "
                + "\(ByteSize.describe(policy.worstCaseGrowthBytesPerSecond))/s could reach the next mark (\(reason))"
        case .continuous:
            "poll \(file) every \(text(rule.longestInterval)) (\(reason); adaptive sampling is off: worst_case_growth = 0)"
        case .guarded:
            "sample \(file) while usage is in a guard band below a mark, every \(text(SamplingRule.shortestInterval)) to "
                + "\(text(SamplingRule.guardLongestInterval)) (\(reason))"
        }
    }

    private func text(_ duration: Duration) -> String { PressurePolicy.formatDuration(duration) }

    /// From continuous sampling to the guard bands: the kernel's usage thresholds are registered.
    func enterGuardedMode() {
        mode = .guarded
        guardWait = nil
        guarding = false
        unconfirmedCrossing = false
        description = describe(because: "the kernel checks usage thresholds only every 128 page events per CPU")
    }

    /// The guard band's width for a capacity.
    func guardBand(capacity: UInt64) -> UInt64 {
        SamplingRule.guardBand(capacity: capacity, processors: processors)
    }

    /// Takes in a full reading: the capacity (and so the marks), whether usage is the system's,
    /// and usage itself.
    func observe(_ snapshot: PressureSnapshot, at now: ContinuousClock.Instant) {
        measuresSystem = snapshot.limit == nil || cgroupFile == nil
        if snapshot.capacityBytes != capacity { plan(capacity: snapshot.capacityBytes ?? 0) }
        lastFullReading = now
        record(snapshot.usageBytes, at: now)
        position = thresholds.count(where: { $0 <= snapshot.usageBytes })
        unconfirmedCrossing = false
    }

    /// The marks, in bytes of a capacity (a new limit changes them all).
    private func plan(capacity: UInt64) {
        self.capacity = capacity
        func bytes(_ ratio: Double) -> UInt64 { UInt64(Double(capacity) * ratio) }
        thresholds = SourcePlan.thresholdRatios(policy).map(bytes)
        levelMarks = [policy.recoveryRatio, policy.warningRatio, policy.criticalRatio].filter { $0 <= 1 }.map(bytes).sorted()
        marksAbove = ([policy.warningRatio, policy.criticalRatio].filter { $0 <= 1 }.map(bytes) + [capacity]).sorted()
        band = guardBand(capacity: capacity)
        slack = capacity / 100
    }

    /// When to read next, or `nil` for not until the next full reading (guarded mode, outside
    /// every band).
    func nextRead(after now: ContinuousClock.Instant) -> ContinuousClock.Instant? {
        guard let usage = last?.usage else { return nil }
        switch mode {
        case .continuous:
            currentInterval = rule.interval(usage: usage, marksAbove: marksAbove, marksBelow: levelMarks, risingBytesPerSecond: rising,
                                            fallingBytesPerSecond: falling)
        case .guarded where unconfirmedCrossing:
            currentInterval = SamplingRule.shortestInterval
        case .guarded:
            let width = guarding ? 2 * band : band
            guarding = levelMarks.contains { usage < $0 && usage + width >= $0 }
            guard guarding else {
                guardWait = nil
                return nil
            }
            let wait = rule.guardInterval(previous: guardWait, changed: changed)
            guardWait = wait
            currentInterval = wait
        }
        return now + currentInterval
    }

    /// Reads usage now.
    ///
    /// - Returns: `.wake` with ``PressureSignal/usageSample`` when usage crossed a threshold,
    ///   with ``PressureSignal/poll`` when a full reading is due, `.quiet` otherwise; `.failed`
    ///   when the cgroup is gone or the file is malformed; `.retry` for a transient failure.
    func sample(at now: ContinuousClock.Instant) -> PressureSourceReport {
        let usage: UInt64
        do {
            usage = try read()
        } catch where error.isTransient {
            return .retry(error)
        } catch {
            return .failed(error)
        }
        record(usage, at: now)
        // Up across a threshold, or down below one by the slack.
        let crossed = thresholds.count(where: { $0 <= usage })
        let fell = thresholds.count(where: { $0 <= usage + slack }) < position
        guard crossed > position || fell else {
            unconfirmedCrossing = false
            if mode == .continuous, let lastFullReading, now - lastFullReading >= rule.longestInterval { return .wake(.normal, .poll) }
            return .quiet
        }
        // Beside the kernel's thresholds a crossing counts once a second read, a floor interval
        // later, still sees it: the kernel reports one in 0.1-3 ms, and its full reading moves
        // `position` (``observe(_:at:)``), so only a crossing it did not report wakes from here.
        if mode == .guarded && !unconfirmedCrossing {
            unconfirmedCrossing = true
            return .quiet
        }
        unconfirmedCrossing = false
        position = crossed
        return .wake(.normal, .usageSample)
    }

    private func read() throws(CgroupError) -> UInt64 {
        if measuresSystem {
            if meminfo == nil { meminfo = try UsageFile("/proc/meminfo", format: .meminfo, files: files) }
            return try meminfo!.read()
        }
        return try cgroupFile!.read()
    }

    /// Notes a reading: whether it changed, and how fast usage rose or fell since the last one
    /// (readings less than a millisecond apart keep the rates they had).
    private func record(_ usage: UInt64, at now: ContinuousClock.Instant) {
        defer { last = (usage, now) }
        guard let last else { return }
        changed = usage != last.usage
        let seconds = (now - last.at).seconds
        guard seconds >= 0.001 else { return }
        let rate = (Double(usage) - Double(last.usage)) / seconds
        (rising, falling) = (max(0, rate), max(0, -rate))
    }
}
