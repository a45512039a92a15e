import CgroupKit
import MemwarnSystem

#if canImport(Glibc)
import Glibc
#endif

/// Usage read where the kernel sends no usage events, at the times ``SamplingRule`` sets: one
/// `pread` of one small file on a descriptor held open (``UsageFile``) for each limit that
/// applies (the cgroup's own and each limited ancestor's, one ``UsageGauge`` each), compared with the
/// thresholds the kernel would have reported on cgroup v1 (the recovery, warning and critical
/// marks and every 5 % of the limit from half of it up). A reading that crosses one wakes the
/// monitor (signal `usageSample`), which then reads every file as after a
/// kernel event; the others cost one read and are forgotten.
///
/// Two modes, per gauge:
/// - **continuous** (cgroup v2, a v1 cgroup whose notifications this user may not register, a
///   host without a limit): always scheduled, by the rule; it also asks for a full reading
///   (signal `poll`) once a ``PressurePolicy/pollInterval`` has passed without
///   one, so the limit, PSI and the growth estimate stay current.
/// - **guarded** (cgroup v1 as root, beside the kernel's usage thresholds registered on that
///   gauge's cgroup): scheduled only while usage sits within two guard bands below a level
///   mark, to find a crossing the kernel did not report; a crossing wakes the monitor once a
///   second read confirms the kernel left it unreported.
///
/// Not a ``PressureSource``: it has no descriptor to watch and no fixed period, so it is not
/// registered with the others; the engine tells it each full reading (``observe(_:at:)``), asks it
/// when to read next (``nextRead(after:)``) and has it read (``sample(at:)``). What a read found
/// is said in a source's terms, a ``PressureSourceReport``, so the engine acts on a crossing as on
/// any source's wake. Loop thread only.
final class UsageSampling {
    enum Mode {
        case continuous
        case guarded
    }

    let rule: SamplingRule
    private let policy: PressurePolicy
    private let files: KernelFiles
    private let processors: Int
    /// Why usage is sampled, for ``description`` (changed when the thresholds are planned again).
    var reason: String
    /// The file opened first: the watched cgroup's usage, or `/proc/meminfo`.
    private let firstFile: String
    /// The watched memory cgroup, or `nil` without a memory controller (`/proc/meminfo` then).
    private let cgroup: CgroupLocation?
    /// The usage files open, by host path (a gauge's file; two gauges may share one).
    private var openFiles: [String: UsageFile] = [:]
    /// The gauges, nearest limit first (or the system's alone).
    private var gauges: [UsageGauge] = []
    /// The gauges whose crossings the kernel reports (v1 thresholds registered), by key.
    private var guardedKeys: Set<String> = []
    private var lastFullReading: ContinuousClock.Instant?

    /// The wait chosen before the next read: how late a change of usage can be seen.
    private(set) var currentInterval: Duration

    /// `continuous` while any gauge is sampled by the rule, `guarded` once every one is guarded.
    var mode: Mode { !gauges.isEmpty && gauges.allSatisfy(\.isGuarded) ? .guarded : .continuous }

    /// Opens the watched cgroup's usage file (or `/proc/meminfo`).
    ///
    /// - Parameters:
    ///   - cgroup: the memory cgroup, or `nil` without a memory controller (`/proc/meminfo` then).
    ///   - measuresSystem: whether usage is measured against the system (no limit applies).
    ///   - reason: why usage is sampled, for ``description``.
    /// - Throws: `CgroupError` when the usage file cannot be opened.
    init(cgroup: CgroupLocation?, measuresSystem: Bool, policy: PressurePolicy, files: KernelFiles, because reason: String) throws(CgroupError) {
        self.policy = policy
        self.files = files
        self.cgroup = cgroup
        self.reason = reason
        rule = SamplingRule(policy: policy)
        processors = SystemConfiguration.onlineProcessors
        currentInterval = rule.longestInterval
        let ownFile = cgroup.flatMap { measuresSystem ? nil : Self.usagePath(of: $0, files: files) }
        firstFile = ownFile ?? "/proc/meminfo"
        _ = try open(firstFile, format: ownFile == nil ? .meminfo : .bytes)
    }

    private static func usagePath(of cgroup: CgroupLocation, files: KernelFiles) -> String {
        cgroup.file(CgroupMemoryReader(location: cgroup, files: files).usageFile)
    }

    private func open(_ path: String, format: UsageFile.Format) throws(CgroupError) -> UsageFile {
        if let file = openFiles[path] { return file }
        let file = try UsageFile(path, format: format, files: files)
        openFiles[path] = file
        return file
    }

    /// What it reads and when, for `watchedSources`.
    var description: String {
        let read = gauges.isEmpty ? firstFile : gauges.map(reads).joined(separator: ", ")
        let guarded = gauges.filter(\.isGuarded).map(\.file.hostPath)
        switch mode {
        case .continuous where rule.isAdaptive:
            return "sample \(read) adaptively: every \(text(rule.floor)) to \(text(rule.longestInterval)), as soon as usage growing at "
                + "\(ByteSize.describe(policy.worstCaseGrowthBytesPerSecond))/s could reach the next mark (\(reason))"
                + (guarded.isEmpty ? "" : "; in the guard bands only: \(guarded.joined(separator: ", "))")
        case .continuous:
            return "poll \(read) every \(text(rule.longestInterval)) (\(reason); adaptive sampling is off: worst_case_growth = 0)"
        case .guarded:
            return "sample \(read) while usage is in a guard band below a mark, every \(text(SamplingRule.shortestInterval)) to "
                + "\(text(SamplingRule.guardLongestInterval)) (the kernel checks usage thresholds only every 128 page events per CPU)"
                + (gauges.contains { $0.inactiveFile != nil }
                    ? "; with inactive page cache left out, adaptively while the page cache hides a mark (usage with it past the mark's guard)" : "")
        }
    }

    private func text(_ duration: Duration) -> String { PressurePolicy.formatDuration(duration) }

    /// What a read of a gauge reads, for ``description``: the usage file, and the `memory.stat`
    /// line taken off it when inactive page cache is left out.
    private func reads(_ gauge: UsageGauge) -> String {
        guard let inactiveFile = gauge.inactiveFile else { return gauge.file.hostPath }
        return "\(gauge.file.hostPath) less \(inactiveFile.format) of \(inactiveFile.hostPath)"
    }

    /// The gauge key of a constraint (``UsageGauge/key``).
    static func key(of constraint: MemoryConstraint) -> String { constraint.cgroupPath + "|" + constraint.limit.file }

    /// The kernel's usage thresholds are registered for these gauges: they are sampled only in
    /// their guard bands from now on (and so is a gauge made for one later).
    func enterGuardedMode(for keys: Set<String>) {
        guardedKeys.formUnion(keys)
        for gauge in gauges where keys.contains(gauge.key) { gauge.guardFromNow() }
    }

    /// The kernel's usage thresholds are being planned again (a limit changed): every gauge is
    /// sampled continuously until ``enterGuardedMode(for:)`` names them again.
    func leaveGuardedMode() {
        guardedKeys = []
        for gauge in gauges { gauge.sampleContinuously() }
    }

    /// The guard band's width for a capacity.
    func guardBand(capacity: UInt64) -> UInt64 {
        SamplingRule.guardBand(capacity: capacity, processors: processors)
    }

    /// Takes in a full reading: a gauge for each limit it names (the system's when none), with
    /// its capacity (and so its marks) and usage.
    ///
    /// - Returns: whether the set of gauges changed (a limit appeared or went: what is read changed).
    /// - Throws: `CgroupError` when a new limit's usage file cannot be opened.
    @discardableResult
    func observe(_ snapshot: PressureSnapshot, at now: ContinuousClock.Instant) throws(CgroupError) -> Bool {
        // Every limit read, a coordinated one's too (its backstop is woken as any crossing is).
        // A snapshot made by hand may name a limit without its constraints: the cgroup's own, then.
        var constraints = snapshot.constraintsToWatch
        if constraints.isEmpty, let limit = snapshot.limit, let cgroup {
            constraints = [MemoryConstraint(cgroupPath: cgroup.path, usageBytes: snapshot.usageBytes, limit: limit)]
        }
        if cgroup == nil { constraints = [] }
        lastFullReading = now
        // The same limits as the last reading (the rule): each gauge takes its own, nothing is made.
        if constraints.isEmpty
            ? gauges.count == 1 && gauges[0].follows(nil)
            : constraints.count == gauges.count && zip(gauges, constraints).allSatisfy({ $0.follows($1) })
        {
            if constraints.isEmpty {
                gauges[0].observe(usage: snapshot.usageBytes, capacity: snapshot.capacityBytes ?? 0, policy: policy, at: now)
            } else {
                for (gauge, constraint) in zip(gauges, constraints) {
                    gauge.observe(
                        usage: constraint.usageBytes, inactiveFileBytes: constraint.inactiveFileBytes, capacity: constraint.limit.bytes, policy: policy,
                        at: now)
                }
            }
            return false
        }
        // A limit appeared or went: the gauges are made again, those that follow the same keep their state.
        var next: [UsageGauge] = []
        for constraint in constraints.isEmpty ? [nil] : constraints.map(Optional.some) {
            let gauge: UsageGauge
            if let existing = gauges.first(where: { $0.follows(constraint) }) {
                gauge = existing
            } else if let constraint, constraint.isNodeFloor {
                // A node agent's floor: the system's used memory, read where the system's is.
                gauge = UsageGauge(
                    constraint: (constraint.cgroupPath, constraint.limit.file), file: try open("/proc/meminfo", format: .meminfo), processors: processors)
            } else if let constraint, let cgroup {
                let location =
                    constraint.isHidden ? cgroup : CgroupLocation(version: cgroup.version, mountPoint: cgroup.mountPoint, path: constraint.cgroupPath)
                let inactiveFile: UsageFile? =
                    policy.countsInactivePageCache
                    ? nil : try open(location.file("memory.stat"), format: .keyed(CgroupMemoryReader(location: location, files: files).inactiveFileKey))
                gauge = UsageGauge(
                    constraint: (constraint.cgroupPath, constraint.limit.file),
                    file: try open(Self.usagePath(of: location, files: files), format: .bytes), inactiveFile: inactiveFile, processors: processors)
            } else {
                gauge = UsageGauge(constraint: nil, file: try open("/proc/meminfo", format: .meminfo), processors: processors)
            }
            if guardedKeys.contains(gauge.key) && !gauge.isGuarded { gauge.guardFromNow() }
            if let constraint {
                gauge.observe(
                    usage: constraint.usageBytes, inactiveFileBytes: constraint.inactiveFileBytes, capacity: constraint.limit.bytes, policy: policy,
                    at: now)
            } else {
                gauge.observe(usage: snapshot.usageBytes, capacity: snapshot.capacityBytes ?? 0, policy: policy, at: now)
            }
            next.append(gauge)
        }
        gauges = next
        openFiles = openFiles.filter { _, file in gauges.contains { $0.file === file || $0.inactiveFile === file } }
        return true
    }

    /// When to read next: the earliest any gauge asks for, or `nil` for not until the next full
    /// reading (every gauge guarded, outside every band).
    func nextRead(after now: ContinuousClock.Instant) -> ContinuousClock.Instant? {
        var wait: Duration?
        for gauge in gauges {
            if let own = gauge.nextWait(rule: rule), own < wait ?? .seconds(1 << 40) { wait = own }
        }
        guard let wait else { return nil }
        currentInterval = wait
        return now + wait
    }

    /// Reads every gauge's usage now.
    ///
    /// - Returns: `.wake` (``WakeHint/readNow``) with `usageSample`
    ///   when usage crossed a threshold of a limit, with `poll` when
    ///   a full reading is due, `.quiet` otherwise; `.failed` when a cgroup is gone or a file is
    ///   malformed; `.retry` for a transient failure. Never `.gone`.
    func sample(at now: ContinuousClock.Instant) -> PressureSourceReport {
        var crossed = false
        for gauge in gauges {
            do {
                if try gauge.read(at: now) { crossed = true }
            } catch  where error.isTransient {
                return .retry(error)
            } catch {
                return .failed(error)
            }
        }
        if crossed { return .wake(.readNow, .usageSample) }
        if mode == .continuous, let lastFullReading, now - lastFullReading >= rule.longestInterval { return .wake(.readNow, .poll) }
        return .quiet
    }
}
