import Logging

/// Runs scenarios one after the other and prints one verdict line each:
/// `PASS <name> (<seconds> s): <details>` or `FAIL <name> (<seconds> s): <reason> -- seen: <details>`.
enum ScenarioRunner {
    /// Runs `scenarios`; returns how many failed.
    static func run(_ scenarios: [Scenario], products: ProductPaths, logger: Logger) async -> Int {
        var failed = 0
        for scenario in scenarios {
            print("RUN  \(scenario.name)")
            let context = ScenarioContext(scenarioName: scenario.name, products: products, logger: logger)
            let start = ContinuousClock.now
            let failure = await outcome(of: scenario, in: context)
            await context.finish()
            let elapsed = ContinuousClock.now - start
            let seconds = (Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18) * 10
            let timing = "(\(seconds.rounded() / 10) s)"
            let details = context.details.joined(separator: "; ")
            if let failure {
                failed += 1
                print("FAIL \(scenario.name) \(timing): \(failure)" + (details.isEmpty ? "" : " -- seen: \(details)"))
            } else {
                print("PASS \(scenario.name) \(timing): \(details)")
            }
        }
        print("v2 scenarios: \(scenarios.count - failed) passed, \(failed) failed")
        return failed
    }

    /// Runs one scenario under its time limit; returns why it failed, or `nil`.
    private static func outcome(of scenario: Scenario, in context: ScenarioContext) async -> (any Error)? {
        do {
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await scenario.body(context) }
                group.addTask {
                    try await Task.sleep(for: scenario.timeLimit)
                    throw ScenarioFailure("did not finish within \(scenario.timeLimit)")
                }
                defer { group.cancelAll() }
                try await group.next()
            }
            return nil
        } catch {
            return error
        }
    }
}
