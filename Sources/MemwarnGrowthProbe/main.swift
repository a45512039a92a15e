// memwarn-growth-probe: a service written as the README teaches — the default policy, a
// PressureMonitor in a ServiceGroup, ReleaseCoordinator.shared.attach(to:), one
// DiscardableCache<Int, [UInt8]> with no limit of its own — that inserts entries at a steady
// rate until it has inserted a total. Run it under `memwarn run --memory-max SIZE`: it survives
// or is OOM-killed. Tests and the `growth` benchmark use it. One JSON line per event on stdout:
//
//   {"event":"armed","usageWatch":..,"pendingThresholds":..,"armingMicros":..,"sinceStartMillis":..,
//    "monotonicNanoseconds":.. (CLOCK_MONOTONIC once armed), "mainNanoseconds":.. (when main began)}
//   {"event":"level","level":..,"source":..,"usage":..,"secondsToLimit":..}
//   {"event":"release","level":..,"target":..,"headroom":..,"freed":..,"micros":..}
//   {"event":"exhausted","floor":..,"usage":..} / {"event":"recovered","usage":..}
//   {"event":"done","inserted":..,"shed":..,"seconds":..,"forecasts":{..}}
//
// Options (sizes in MiB):
//   --rate MIB_PER_S      insert rate (default 25)
//   --total MIB           total to insert (default 512)
//   --entry-kib KIB       entry size (default 1024)
//   --unreleasable SHARE  share of each insert held outside any cache (default 0)
//   --shed                refuse new inserts while memory is exhausted (load shedding)
//   --pinned SHARE        share of each insert cached as PurgeableData in a second cache ("pinned"),
//                         never ended (`endContentAccess()` not called: the newcomer's mistake) — in use,
//                         so no release can take it; the release and exhausted events name it
//   --leak MIB_PER_MIN    besides the inserts, keep this much a minute that no release can reach (a leak;
//                         the soak's leak verdict is measured with it)
//   --floor MIB           hold this much, outside any cache, from the start (a service's fixed floor)
//   --bounded-cache MIB   instead of the inserts: a plain dictionary capped at MIB (no memwarn release
//                         reaches it), looked up --lookups times a second for a random key of a working
//                         set of --working-set MIB (default: the cap), in --entry-kib entries; a miss
//                         inserts, evicting the oldest entry at the cap. It fills as its misses fall and
//                         holds at its size until SIGTERM (the soak's leak verdict must not call it a leak)
//   --working-set MIB     the bounded cache's working set (default: its cap)
//   --lookups PER_S       the bounded cache's lookups a second (default 5)
//   --control DIR         serve a control endpoint in DIR (memwarn trigger, memwarn agent, memwarn soak
//                         find it; `default` for the default directory, where memwarn soak looks);
//                         one {"event":"control","socket":..} line once it listens
//   --start-after SECONDS wait this long before the first insert (an agent finds the service first)
//   --hold SECONDS        stay up this long after the last insert (holding the cache), then end
//   --log-level LEVEL     the monitor's logger (swift-log's, to standard error): trace … critical
//                         (default critical: silent)
//   --releaser NAME       memwarn (default) | rise-only (the release before the growth work:
//                         on a rise only, to the recovery mark, in a level observer on the monitor's
//                         event thread) |
//                         poller (every 100 ms: at or above the warning mark, release to the
//                         recovery mark) | none
import CgroupKit
import Foundation
import Logging
import Memwarn
import MemwarnMonitor
import MemwarnSystem
import ServiceLifecycle

#if canImport(Glibc)
import Glibc
#endif

/// `CLOCK_MONOTONIC` when main began (the `armed` line reports it, for the time-to-armed benchmark).
let mainNanoseconds: Int = {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return now.tv_sec * 1_000_000_000 + now.tv_nsec
}()

struct Options {
    var rate = 25.0
    var totalMiB = 512.0
    var entryBytes = 1 << 20
    var unreleasableShare = 0.0
    var pinnedShare = 0.0
    var shed = false
    var releaser = "memwarn"
    var controlDirectory: String?
    var holdSeconds = 0.0
    var startAfterSeconds = 0.0
    var leakMiBPerMinute = 0.0
    var floorMiB = 0.0
    var boundedCacheMiB = 0.0
    var workingSetMiB: Double?
    var lookupsPerSecond = 5.0
    var logLevel = Logger.Level.critical

    init(_ arguments: [String]) throws {
        var iterator = arguments.makeIterator()
        func value(_ name: String) throws -> String {
            guard let next = iterator.next() else { throw Failure("\(name) needs a value") }
            return next
        }
        func number(_ name: String) throws -> Double {
            guard let number = Double(try value(name)), number.isFinite, number >= 0 else { throw Failure("\(name) needs a non-negative number") }
            return number
        }
        while let argument = iterator.next() {
            switch argument {
            case "--rate": rate = try number(argument)
            case "--total": totalMiB = try number(argument)
            case "--entry-kib": entryBytes = Int(try number(argument) * 1024)
            case "--unreleasable": unreleasableShare = min(1, try number(argument))
            case "--pinned": pinnedShare = min(1, try number(argument))
            case "--shed": shed = true
            case "--control": controlDirectory = try value(argument)
            case "--hold": holdSeconds = try number(argument)
            case "--start-after": startAfterSeconds = try number(argument)
            case "--leak": leakMiBPerMinute = try number(argument)
            case "--floor": floorMiB = try number(argument)
            case "--bounded-cache": boundedCacheMiB = try number(argument)
            case "--working-set": workingSetMiB = try number(argument)
            case "--lookups": lookupsPerSecond = try number(argument)
            case "--log-level":
                let name = try value(argument)
                guard let level = Logger.Level(rawValue: name) else { throw Failure("unknown log level \(name)") }
                logLevel = level
            case "--releaser":
                releaser = try value(argument)
                guard ["memwarn", "rise-only", "poller", "none"].contains(releaser) else { throw Failure("unknown releaser \(releaser)") }
            default: throw Failure("unknown argument \(argument)")
            }
        }
        guard rate > 0, entryBytes >= 4096 else { throw Failure("--rate must be positive and --entry-kib at least 4") }
        guard boundedCacheMiB == 0 || lookupsPerSecond > 0 else { throw Failure("--lookups must be positive") }
    }
}

struct Failure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

let start = ContinuousClock.now

extension Duration {
    var inSeconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}
let output = Locked(FileHandle.standardOutput)

func emit(_ event: String, _ fields: [String: Any] = [:]) {
    var object = fields
    object["event"] = event
    object["t"] = ((ContinuousClock.now - start).inSeconds * 1000).rounded() / 1000
    guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]) else { return }
    output.withLock { $0.write(data + Data("\n".utf8)) }
}

/// Inserts at the rate until the total, then asks the group to shut down.
struct Load: Service {
    let options: Options
    let cache: DiscardableCache<Int, [UInt8]>
    let pinned: DiscardableCache<Int, PurgeableData>
    let monitor: PressureMonitor?

    /// Inserts until done, or until SIGTERM (graceful shutdown) ends the service cleanly.
    func run() async throws {
        do {
            try await cancelWhenGracefulShutdown { try await insert() }
        } catch is CancellationError {}
    }

    private func insert() async throws {
        let count = Int(options.totalMiB * 1_048_576) / options.entryBytes
        let interval = Duration.seconds(Double(options.entryBytes) / (options.rate * 1_048_576))
        var unreleasable: [[UInt8]] = []
        var owed = 0.0
        var inserted = 0
        var shed = 0
        if options.startAfterSeconds > 0 { try await Task.sleep(for: .seconds(options.startAfterSeconds)) }
        let began = ContinuousClock.now
        for index in 0..<count {
            let due = began + interval * index
            if due > .now { try await Task.sleep(until: due) }
            if options.shed, monitor?.isMemoryExhausted == true {
                shed += 1
                continue
            }
            owed += options.unreleasableShare * Double(options.entryBytes)
            let held = min(options.entryBytes, Int(owed / 4096) * 4096)
            owed -= Double(held)
            if held > 0 { unreleasable.append([UInt8](repeating: UInt8(truncatingIfNeeded: index), count: held)) }
            let pin = min(options.entryBytes - held, Int(options.pinnedShare * Double(options.entryBytes)) / 4096 * 4096)
            if pin > 0 {
                // Made and cached without endContentAccess(): it stays accessed, so in use.
                pinned.setObject(PurgeableData(repeating: UInt8(truncatingIfNeeded: index | 1), count: pin), forKey: index, cost: pin)
            }
            if options.entryBytes - held - pin > 0 {
                cache.setObject(
                    [UInt8](repeating: UInt8(truncatingIfNeeded: index), count: options.entryBytes - held - pin), forKey: index,
                    cost: options.entryBytes - held - pin)
            }
            inserted += 1
        }
        let tally = monitor?.forecastTally ?? ForecastTally()
        emit(
            "done",
            [
                "inserted": inserted, "shed": shed, "seconds": (ContinuousClock.now - began).inSeconds,
                "unreleasableBytes": unreleasable.reduce(0) { $0 + $1.count },
                "forecasts": ["raised": tally.raised, "confirmed": tally.confirmed, "false": tally.falseAlarms],
            ])
        if options.holdSeconds > 0 { try? await Task.sleep(for: .seconds(options.holdSeconds)) }
        withExtendedLifetime(unreleasable) {}
    }
}

/// Keeps `--floor` from the start and adds `--leak` every 200 ms, touched, never released.
struct Leak: Service {
    let options: Options

    func run() async throws {
        var kept: [[UInt8]] = []
        if options.floorMiB > 0 { kept.append([UInt8](repeating: 1, count: Int(options.floorMiB * 1_048_576))) }
        guard options.leakMiBPerMinute > 0 else {
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: .seconds(86_400 * 365)) }
            withExtendedLifetime(kept) {}
            return
        }
        let began = ContinuousClock.now
        let rate = options.leakMiBPerMinute
        let leaked = try? await cancelWhenGracefulShutdown { () async throws -> Int in
            var leaked = 0.0
            var kept: [[UInt8]] = []
            while true {
                try await Task.sleep(for: .milliseconds(200))
                let due = (ContinuousClock.now - began).inSeconds / 60 * rate * 1_048_576
                if due - leaked >= 4096 {
                    let bytes = Int(due - leaked) / 4096 * 4096
                    kept.append([UInt8](repeating: UInt8(truncatingIfNeeded: kept.count | 1), count: bytes))
                    leaked += Double(bytes)
                }
            }
        }
        withExtendedLifetime((kept, leaked)) {}
    }
}

/// A cache of a fixed size that memwarn never sees (`--bounded-cache`): a plain dictionary, looked
/// up for random keys of a working set at a steady rate; a miss inserts, evicting the oldest entry
/// once the cache is at its cap. It fills as 1 − e^(−t/τ), τ = keys / lookups a second, and holds at
/// its size until SIGTERM: a warm-up, never a leak.
struct BoundedCache: Service {
    let options: Options

    func run() async throws {
        let entryBytes = options.entryBytes
        let capacity = max(1, Int(options.boundedCacheMiB * 1_048_576) / entryBytes)
        let keys = max(1, Int((options.workingSetMiB ?? options.boundedCacheMiB) * 1_048_576) / entryBytes)
        let interval = Duration.seconds(1 / options.lookupsPerSecond)
        let began = ContinuousClock.now
        try? await cancelWhenGracefulShutdown {
            var cache: [Int: [UInt8]] = [:]
            var order: [Int] = []  // insertion order: the oldest is evicted at the cap
            var lookups = 0
            while true {
                lookups += 1
                try await Task.sleep(until: began + interval * lookups)
                let key = Int.random(in: 0..<keys)
                guard cache[key] == nil else { continue }
                if cache.count >= capacity, !order.isEmpty { cache[order.removeFirst()] = nil }
                cache[key] = [UInt8](repeating: UInt8(truncatingIfNeeded: key | 1), count: entryBytes)
                order.append(key)
            }
        }
    }
}

/// The 100 ms poller peer: at or above the warning mark, release to the recovery mark.
func startPoller(policy: PressurePolicy, coordinator: ReleaseCoordinator) throws {
    let sampler = SnapshotSampler(layout: try CgroupDiscovery().layout())
    Thread.detachNewThread {
        while true {
            Thread.sleep(forTimeInterval: 0.1)
            guard let snapshot = try? sampler.sample(), snapshot.ratio >= policy.warningRatio else { continue }
            coordinator.release(level: .warning, targetBytes: ReleaseCoordinator.target(for: snapshot, policy: policy))
        }
    }
}

do {
    let options = try Options(Array(CommandLine.arguments.dropFirst()))
    var logger = Logger(label: "memwarn-growth-probe")
    logger.logLevel = options.logLevel
    let environment = ProcessInfo.processInfo.environment
    let policy = try PressurePolicy.load(environment: environment)
    let cache = DiscardableCache<Int, [UInt8]>()
    cache.name = "entries"
    let pinned = DiscardableCache<Int, PurgeableData>()
    pinned.name = "pinned"
    let coordinator = ReleaseCoordinator.shared
    coordinator.addReportObserver { report in
        emit(
            "release",
            [
                "level": report.level.rawValue, "target": report.targetBytes, "headroom": report.headroomBytes,
                "freed": report.freedBytes, "micros": Int(report.duration.inSeconds * 1e6),
                "inUse": Dictionary(report.entriesInUse.map { ($0.consumer, $0.bytesInUse) }, uniquingKeysWith: +),
            ])
    }
    var services: [ServiceGroupConfiguration.ServiceConfiguration] = []
    var monitor: PressureMonitor?
    if options.releaser != "poller" && options.releaser != "none" {
        let configuration = MonitorConfiguration(policy: policy, environment: environment)
        let running = PressureMonitor(configuration: configuration, logger: logger)
        // Armed by its initializer: before the load below can start.
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        emit(
            "armed",
            [
                "usageWatch": running.arming?.usageWatch.name ?? "none", "pendingThresholds": running.arming?.pendingThresholds ?? 0,
                "armingMicros": running.arming.map { Int($0.duration.inSeconds * 1e6) } ?? -1,
                "sinceStartMillis": running.arming?.sinceProcessStart.map { Int($0.inSeconds * 1e3) } ?? -1,
                "monotonicNanoseconds": Int(now.tv_sec) * 1_000_000_000 + now.tv_nsec, "mainNanoseconds": mainNanoseconds,
            ])
        running.addObserver { event in
            emit(
                "level",
                [
                    "level": event.level.rawValue, "source": event.source.name, "usage": Int(event.snapshot.usageBytes),
                    "ratio": event.snapshot.ratio, "secondsToLimit": event.forecast?.secondsToLimit ?? -1,
                ])
        }
        running.addExhaustionObserver { change in
            emit(
                change.isExhausted ? "exhausted" : "recovered",
                [
                    "floor": Int(change.floorBytes), "usage": Int(change.usageBytes),
                    "heldInUse": change.heldInUseBytes,
                    "holders": Dictionary(change.holders.map { ($0.consumer, $0.bytes) }, uniquingKeysWith: +),
                ])
        }
        if options.releaser == "memwarn" {
            coordinator.attach(to: running)
        } else {
            // The release before it kept up with growth: on a rise only, to the recovery mark,
            // in a level observer, on the monitor's event thread (`memwarn-monitor`; not the
            // release thread that `attach(to:)` uses).
            running.addObserver { event in
                guard event.level > (event.previous ?? .normal) else { return }
                coordinator.release(level: event.level, targetBytes: ReleaseCoordinator.target(for: event.snapshot, policy: policy))
            }
        }
        services.append(.init(service: running))
        monitor = running
        if let directory = options.controlDirectory {
            let control = ControlService(monitor: running, directory: directory == "default" ? nil : directory, logger: logger)
            services.append(.init(service: control))
            Task {
                if let socket = await control.started() { emit("control", ["socket": socket]) }
            }
        }
    } else if options.releaser == "poller" {
        try startPoller(policy: policy, coordinator: coordinator)
    }
    if options.leakMiBPerMinute > 0 || options.floorMiB > 0 { services.append(.init(service: Leak(options: options))) }
    if options.boundedCacheMiB > 0 {
        services.append(.init(service: BoundedCache(options: options), successTerminationBehavior: .gracefullyShutdownGroup))
    } else {
        services.append(
            .init(service: Load(options: options, cache: cache, pinned: pinned, monitor: monitor), successTerminationBehavior: .gracefullyShutdownGroup))
    }
    let group = ServiceGroup(configuration: .init(services: services, gracefulShutdownSignals: [.sigterm], logger: logger))
    try await group.run()
} catch {
    FileHandle.standardError.write(Data("memwarn-growth-probe: \(error)\n".utf8))
    exit(2)
}
