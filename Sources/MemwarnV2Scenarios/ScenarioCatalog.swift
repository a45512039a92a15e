/// Every v2 scenario, in the order they run.
enum ScenarioCatalog {
    static let all: [Scenario] = [
        DiscoveryScenario.scenario,
        SteppedUsageScenario.scenario,
        HighThrottlingScenario.scenario,
        LimitChangeScenario.scenario,
        AdmissionScenario.scenario,
        OOMKillScenario.scenario,
        StatusCommandScenario.scenario,
        WatchCommandScenario.scenario,
        RunCommandScenario.scenario,
        TerminateSuspendedScenario.scenario,
        SoakScenario.scenario,
        SoakScenario.ownService,
        GrowthSamplingScenario.scenario,
        SharedLimitScenario.scenario,
        ContainerScenario.scenario,
    ]
}
