/// One cgroup v2 scenario: a name for its PASS or FAIL line and `--only`, a time limit, and a
/// body that asserts (throwing ``ScenarioFailure``, or any error, when something does not
/// hold) and notes what it saw in its ``ScenarioContext``.
struct Scenario: Sendable {
    /// The name on its verdict line, such as `oom-kill-critical`.
    let name: String
    /// How long it may take before it counts as hung and fails.
    let timeLimit: Duration
    /// The scenario itself.
    let body: @Sendable (ScenarioContext) async throws -> Void
}
