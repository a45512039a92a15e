package import CgroupKit
import Foundation
package import Logging
import MemwarnControl
package import MemwarnMonitor
package import MemwarnSystem

/// A command run in a new cgroup with a memory limit, watched by a ``PressureMonitor``:
/// what `memwarn run` and `memwarn soak` do.
///
/// The cgroup is a uniquely named child of this process's own memory cgroup, made with the
/// limit before the command starts; the command joins it between `fork` and `exec`, so all
/// of its memory counts. ``wait(onLevel:)`` returns once the command has ended and the cgroup
/// is removed — any process the command left behind in it is killed first.
package final class ConstrainedRun: Sendable {
    /// What to run and how.
    package struct Options: Sendable {
        /// The command and its arguments.
        package var command: [String]
        /// The hard limit (`memory.max`, v1 `memory.limit_in_bytes`).
        package var memoryMaxBytes: UInt64
        /// The throttling limit (cgroup v2 `memory.high`): by default halfway between the critical
        /// mark and the hard limit on v2, nothing on v1.
        package var memoryHigh: MemoryHighSetting
        /// The command's environment.
        package var environment: [String: String]
        /// The monitor's policy.
        package var policy: PressurePolicy
        /// Read the cgroup's usage this often for ``ConstrainedRunReport/samples`` (`nil`: never).
        package var sampleInterval: Duration?
        /// Where the command's standard output goes: a descriptor the caller reads, or `nil`
        /// to share this process's.
        package var standardOutput: Int32?
        /// Where the command's standard error goes (`nil`: this process's).
        package var standardError: Int32?
        /// The command's standard input (`nil`: this process's).
        package var standardInput: Int32?
        /// Whether the command leads a process group of its own: then ``ConstrainedRun/forward(signal:)``
        /// signals the group (the command and what it started), and the terminal's Ctrl-C does not
        /// reach it directly.
        package var newProcessGroup = false
        /// The cgroup's name prefix.
        package var namePrefix: String

        /// - Parameter environment: the command's environment; `nil` passes this process's.
        package init(
            command: [String], memoryMaxBytes: UInt64, memoryHigh: MemoryHighSetting = .automatic,
            environment: [String: String]? = nil, policy: PressurePolicy = PressurePolicy(),
            sampleInterval: Duration? = nil, standardOutput: Int32? = nil, standardError: Int32? = nil, namePrefix: String = "memwarn-run"
        ) {
            self.command = command
            self.memoryMaxBytes = memoryMaxBytes
            self.memoryHigh = memoryHigh
            self.environment = environment ?? ProcessInfo.processInfo.environment
            self.policy = policy
            self.sampleInterval = sampleInterval
            self.standardOutput = standardOutput
            self.standardError = standardError
            self.namePrefix = namePrefix
        }
    }

    package let options: Options
    /// What the run records as it goes (usage samples, level changes): the one store of them,
    /// which its report is made from and a soak's leg reads while it runs.
    package let recorder = RunRecorder()
    /// The command's pid.
    package var pid: Int32 { child.pid }
    private let child: WaitedChild
    /// The cgroups of earlier runs whose `memwarn` process is gone, removed before this one began.
    package let leftoversRemoved: [Leftover]
    /// The cgroup it runs in.
    package let cgroup: MemoryCgroup
    /// The run's monitor on the cgroup, armed before the command started.
    private let monitor: PressureMonitor
    /// The monitor's level events from its first reading on, made before the command started:
    /// the stream keeps every change until ``wait(onLevel:onSample:)`` takes them.
    private let levelEvents: AsyncStream<LevelEvent>
    private let start: ContinuousClock.Instant
    private let logger: Logger
    private let forwarded = Locked(0)

    /// The number of this process's last run cgroup (`<prefix>-<pid>-<n>`).
    private static let counter = Locked(0)

    /// The next number for a cgroup of this process's (`<prefix>-<pid>-<n>`): one a run, and one
    /// for each soak leg's load (``HelperCgroup``).
    static func nextCgroupNumber() -> Int {
        counter.withLock { counter in
            counter += 1
            return counter
        }
    }
    /// The lock on the run's cgroup, held until the run is torn down (``claimIfAbandoned(_:owner:)``).
    private let claim: DirectoryLock
    /// The locks on the leaves this process moved into (cgroup v2): held until it ends.
    private static let leafLocks = Locked<[DirectoryLock]>([])

    /// Makes the cgroup and starts the command in it.
    ///
    /// - Throws: ``StartError`` (no command, not found), or `CgroupError` (no memory
    ///   controller, no permission to create cgroups — the message says how to get one).
    package init(_ options: Options, logger: Logger) throws {
        guard let name = options.command.first else { throw StartError(.noCommand, description: "no command to run") }
        guard let executable = ExecutablePath.resolve(name, path: options.environment["PATH"]) else {
            throw StartError(.commandNotFound, description: "\(name): command not found (or not executable)")
        }
        let layout = try CgroupDiscovery().layout()
        guard let own = layout.memory else {
            throw CgroupError(.noMemoryController, "this host has no memory controller to limit the command with (mode \(layout.mode.rawValue))")
        }
        leftoversRemoved = Self.removeLeftovers(in: own, logger: logger)
        // cgroup v2: the children of our cgroup need the memory controller; alone in it, we move
        // to a leaf (`<prefix>-<pid>-0`, removed as a leftover once we are gone) to allow that.
        // The leaf is locked before this process moves into it (held until it ends): a cleaner in
        // another PID namespace, to which this pid means nothing, never finds it unclaimed.
        if let leaf = try ChildMemoryControl.enable(
            below: own, leafName: "\(options.namePrefix)-\(getpid())-0",
            beforeMoving: { leaf throws(CgroupError) in
                let lock = try Self.claim(leaf)
                Self.leafLocks.withLock { $0.append(lock) }
            })
        {
            logger.notice("moved into a leaf cgroup so that the run's cgroup can have a memory limit", metadata: ["leaf": "\(leaf.path)"])
        }
        let high = options.memoryHigh.bytes(
            memoryMax: options.memoryMaxBytes, criticalRatio: options.policy.criticalRatio,
            isV2: own.version == .v2)
        let cgroup = try Self.makeCgroup(in: own, options: options, highBytes: high)
        do {
            claim = try Self.claim(cgroup.location)
        } catch {
            try? cgroup.remove()
            throw error
        }
        // Armed before the command starts, so that its first allocation is already watched. The
        // command's cgroup, not this process's: a service manager's MEMORY_PRESSURE_WATCH in
        // memwarn's environment names memwarn's own unit, and PSI on v1 is not the cgroup's own.
        var configuration = MonitorConfiguration(policy: options.policy, cgroupPath: cgroup.location.path, environment: [:])
        configuration.watchesPressureStall = false  // usage against the limit: the cgroup's own signal
        let monitor = PressureMonitor(configuration: configuration, logger: logger)
        // The stream starts with the first reading (replayed: nothing can change before the
        // command starts) and keeps every change until the monitor's run ends.
        levelEvents = monitor.events()
        self.monitor = monitor
        start = .now
        do throws(SystemError) {
            var spawn = ChildSpawn([executable] + options.command.dropFirst(), environment: options.environment.map { "\($0.key)=\($0.value)" })
            spawn.arguments[0] = name
            spawn.cgroupProcsFile = cgroup.location.file("cgroup.procs")
            spawn.standardOutput = options.standardOutput
            spawn.standardError = options.standardError
            spawn.standardInput = options.standardInput
            spawn.newProcessGroup = options.newProcessGroup
            spawn.parentDeathSignal = SIGKILL  // the command dies with this process, whatever kills it
            child = try WaitedChild(spawn)
        } catch {
            monitor.disarm()  // its sources closed before the cgroup goes, so it reads nothing gone
            try? cgroup.remove()
            throw StartError(.couldNotStart, description: Self.startFailure(error, command: name))
        }
        self.cgroup = cgroup
        self.options = options
        self.logger = logger
    }

    /// Why memwarn could not start `command`, in words that say whose failure it was: running
    /// out of descriptors or processes is memwarn's, and says so (with the limit to raise).
    private static func startFailure(_ error: SystemError, command: String) -> String {
        switch error.errno {
        case EMFILE:
            "memwarn ran out of file descriptors starting \(command): \(error) (raise its limit: ulimit -n)"
        case ENFILE:
            "memwarn ran out of file descriptors starting \(command): \(error) (the system's limit: fs.file-max)"
        case EAGAIN, ENOMEM:
            "memwarn could not start \(command): \(error) (out of processes or memory: ulimit -u, or the system's limits)"
        default:
            "memwarn could not start \(command): \(error)"
        }
    }

    /// Creates the run's cgroup, `<prefix>-<pid>-<n>`, exclusively: a cgroup that already has
    /// the name (made by someone else) is never adopted — the next number is tried.
    private static func makeCgroup(in own: CgroupLocation, options: Options, highBytes: UInt64?) throws(CgroupError) -> MemoryCgroup {
        while true {
            let number = nextCgroupNumber()
            do {
                return try MemoryCgroup(
                    parent: own, name: "\(options.namePrefix)-\(getpid())-\(number)",
                    maximumBytes: options.memoryMaxBytes, highBytes: highBytes)
            } catch  where error.errno == EEXIST && number < 1_000 {
                continue
            }
        }
    }

    /// Whether the command has ended (it may not be reaped by ``wait(onLevel:onSample:)`` yet).
    package var hasEnded: Bool { child.exitIfEnded != nil }

    /// Sends a signal on to the command (Ctrl-C or SIGTERM of `memwarn run`); the second
    /// request kills it (SIGKILL), for a command that ignores the first.
    package func forward(signal: Int32) {
        let count = forwarded.withLock { count in
            count += 1
            return count
        }
        if options.newProcessGroup {
            child.signalGroup(count == 1 ? signal : SIGKILL)
        } else {
            child.signal(count == 1 ? signal : SIGKILL)
        }
    }

    /// Waits for the command itself to end (``wait(onLevel:onSample:)`` then tears the run down).
    package func commandExit() async -> ProcessExit {
        await child.exit()
    }

    /// Watches the command until it ends, recording its samples and level changes in
    /// ``recorder``, then collects the figures, removes the cgroup, and reports.
    ///
    /// - Parameters:
    ///   - onLevel: called with each level change, as it happens.
    ///   - onSample: called with each usage reading (see ``Options/sampleInterval``).
    package func wait(
        onLevel: @escaping @Sendable (LevelEvent) -> Void = { _ in },
        onSample: @escaping @Sendable (SoakSample) -> Void = { _ in }
    ) async -> ConstrainedRunReport {
        let monitor = self.monitor
        let start = self.start
        let recorder = self.recorder
        let watching = Task { [levelEvents] in
            for await event in levelEvents where event.level != event.previous || event.previous == nil {
                recorder.record(event.level, at: Self.seconds(since: start), usageBytes: event.snapshot.usageBytes)
                onLevel(event)
            }
        }
        let monitorError = Locked<String?>(nil)
        let monitoring = Task {
            do {
                try await monitor.run()
            } catch is CancellationError {
            } catch {
                monitorError.withLock { $0 = "\(error)" }
                logger.warning("the run's monitor stopped; the command runs on unmonitored", metadata: ["error": "\(error)"])
            }
        }
        let sampling = options.sampleInterval.map { interval in
            Task { [cgroup] in
                let reader = cgroup.reader
                while !Task.isCancelled {
                    if let usage = try? reader.usage() {
                        let sample = SoakSample(seconds: Self.seconds(since: start), usageBytes: usage)
                        recorder.record(sample)
                        onSample(sample)
                    }
                    try? await Task.sleep(for: interval)
                }
            }
        }

        let exit = await child.exit()
        ControlClient.removeSocket(ofEnded: child.pid)  // a command killed before its monitor stopped leaves one
        let duration = Self.seconds(since: start)
        sampling?.cancel()
        monitoring.cancel()
        _ = await monitoring.value
        _ = await watching.value  // the stream ended with the run: every change is recorded

        let reader = cgroup.reader
        let oomKills = (try? reader.events().oomKill) ?? 0
        let peak = try? reader.peakUsage()
        let removed = removeCgroup()
        let levelChanges = recorder.levelChanges
        return ConstrainedRunReport(
            command: options.command, cgroup: cgroup.location.path, memoryMaxBytes: options.memoryMaxBytes,
            memoryHighBytes: cgroup.highBytes, exit: exit, exitCode: exit.code, oomKills: oomKills,
            peakUsageBytes: peak ?? nil, warnings: ConstrainedRunReport.warnings(in: levelChanges), levelChanges: levelChanges,
            durationSeconds: duration, cgroupRemoved: removed, samples: recorder.samples, monitorError: monitorError.withLock { $0 })
    }

    /// Kills what the command left in the cgroup, then removes it.
    private func removeCgroup() -> Bool {
        for _ in 0..<50 {
            guard let left = try? cgroup.processes(), !left.isEmpty else { break }
            for process in left where process > 0 { try? Signals.send(SIGKILL, to: process) }  // the command's own descendants (0: outside this PID namespace)
            SystemThread.sleep(for: .milliseconds(20))
        }
        do {
            try cgroup.remove()
            return true
        } catch {
            logger.error("could not remove the run's cgroup", metadata: ["cgroup": "\(cgroup.location.directory)", "error": "\(error)"])
            return false
        }
    }

    private static func seconds(since start: ContinuousClock.Instant) -> Double {
        let (seconds, attoseconds) = (ContinuousClock.now - start).components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
