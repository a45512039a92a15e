import CgroupKit
import Foundation
import MemwarnMonitor
import MemwarnSystem

/// A leg's load and check: `/bin/sh -c command`, outside the limited cgroup, in a cgroup beside
/// it (``HelperCgroup``, no limit of its own) made with the first of them, so that what they start
/// is killed with it at the end, or by the next run's start when the soak is killed.
final class LegShells {
    private let run: ConstrainedRun
    private let service: Soak.Service?
    private let environment: [String: String]
    private var helper: HelperCgroup?

    /// - Parameters:
    ///   - run: the service's run, beside whose cgroup the shells' goes.
    ///   - service: the soaked service (its output descriptor and ready URL); `nil` for the demo.
    ///   - environment: the service's environment, which the shells get with the soak's variables.
    init(beside run: ConstrainedRun, service: Soak.Service?, environment: [String: String]) {
        self.run = run
        self.service = service
        self.environment = environment
    }

    /// Starts `command` leading its own process group, with `MEMWARN_SOAK_URL`, `MEMWARN_SOAK_PID`
    /// and `MEMWARN_SOAK_RUN` in its environment (and not `MEMWARN_DISABLE`).
    ///
    /// - Throws: `CgroupError` when the shells' cgroup cannot be made, ``SystemError`` when the
    ///   shell cannot start.
    func start(_ command: String) throws -> WaitedChild {
        let cgroup = try helper ?? HelperCgroup(beside: run)
        helper = cgroup
        var environment = environment
        environment["MEMWARN_SOAK_URL"] = service?.readyAddress?.origin ?? ""
        environment["MEMWARN_SOAK_PID"] = String(run.pid)
        environment.removeValue(forKey: MonitorConfiguration.disableVariable)
        var spawn = ChildSpawn(["/bin/sh", "-c", command], environment: environment.map { "\($0.key)=\($0.value)" })
        spawn.standardInput = SoakLeg.nullInput
        spawn.standardOutput = service?.outputDescriptor ?? 2
        spawn.standardError = service?.outputDescriptor ?? 2
        spawn.newProcessGroup = true
        spawn.parentDeathSignal = SIGKILL
        spawn.cgroupProcsFile = cgroup.procsFile
        return try WaitedChild(spawn)
    }

    /// Kills what the shells left, and removes their cgroup (when one was made).
    func remove() {
        helper?.remove()
    }
}
