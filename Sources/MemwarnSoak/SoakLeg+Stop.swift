import Foundation
import MemwarnSystem

extension SoakLeg {
    /// Stops the service (SIGTERM to its group, SIGKILL after ``stopGrace``), then the load
    /// likewise, and what the load left running in its group.
    ///
    /// - Parameters:
    ///   - run: the service's run.
    ///   - load: the load, when one started.
    /// - Returns: whether the service ignored SIGTERM and was killed.
    func stop(_ run: ConstrainedRun, load: WaitedChild?) async -> Bool {
        var killedAtStop = false
        if !run.hasEnded {
            run.forward(signal: SIGTERM)
            if await Self.waitForCommand(run, timeout: Self.stopGrace) == nil {
                run.forward(signal: SIGKILL)
                killedAtStop = true
            }
        }
        if let load {
            load.signalGroup(SIGTERM)
            if load.exitIfEnded == nil, await Self.waitForExit(load, timeout: Self.stopGrace) == nil { load.signalGroup(SIGKILL) }
            _ = await load.exit()
            load.signalGroup(SIGKILL)  // what the load left running in its group
        }
        return killedAtStop
    }

    /// Runs `--check`, started by `start`; its exit status (127 when it could not start, 124 when
    /// it ran over ``checkTimeout`` and was killed). An interruption ends it (SIGTERM to its group).
    func runCheck(interruption: SoakInterruption, start: () throws -> WaitedChild) async -> Int32 {
        guard let check = try? start() else { return 127 }
        interruption.onInterrupt { _ in check.signalGroup(SIGTERM) }
        defer { check.signalGroup(SIGKILL) }  // what the check left running in its group
        if await Self.waitForExit(check, timeout: Self.checkTimeout) == nil {
            check.signalGroup(SIGKILL)
            _ = await check.exit()
            return 124
        }
        return (await check.exit()).code
    }

    /// Waits for the service's own process (not the run's teardown) to end, at most `timeout`.
    private static func waitForCommand(_ run: ConstrainedRun, timeout: Duration) async -> ProcessExit? {
        let done = OneTimeEvent<ProcessExit>()
        Task { done.fire(await run.commandExit()) }
        return await done.wait(for: timeout)
    }

    /// Waits for `child` to end, at most `timeout`.
    private static func waitForExit(_ child: WaitedChild, timeout: Duration) async -> ProcessExit? {
        let done = OneTimeEvent<ProcessExit>()
        Task { done.fire(await child.exit()) }
        return await done.wait(for: timeout)
    }
}
