import MemwarnMonitor

extension PressurePolicy {
    /// The policy the monitor scenarios start from: a re-check every 250 ms while raised and a
    /// 500 ms PSI window (kept as it is: root in the VM has CAP_SYS_RESOURCE), with the given
    /// poll interval (60 s keeps polling out of a scenario) and hold time.
    static func scenario(pollInterval: Duration, holdTime: Duration) -> PressurePolicy {
        var policy = PressurePolicy()
        policy.pollInterval = pollInterval
        policy.recheckInterval = .milliseconds(250)
        policy.holdTime = holdTime
        policy.psiWindow = .milliseconds(500)
        return policy
    }
}
