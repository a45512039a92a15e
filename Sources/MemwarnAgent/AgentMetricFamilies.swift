package import MemwarnMonitor

/// The families the agent writes to its metrics file (`--metrics-file`), each with the `# HELP`
/// text the file carries; the article "Metrics, series by series" lists them.
package enum AgentMetricFamilies {
    static let services = MemwarnMetric("memwarn_agent_services", .gauge, help: "memwarn services found under the parent (control endpoints that answered).")
    static let unlinkedCgroups = MemwarnMetric(
        "memwarn_agent_unlinked_cgroups", .gauge, help: "The parent's child cgroups with no memwarn service: the agent cannot ask them to release.")
    static let parentUsage = MemwarnMetric(
        "memwarn_agent_parent_usage_bytes", .gauge, help: "The guarded parent's usage, against its limit, at the latest reading.")
    static let parentLimit = MemwarnMetric("memwarn_agent_parent_limit_bytes", .gauge, help: "The guarded parent's limit.")
    static let asks = MemwarnMetric(
        "memwarn_agent_asks_total", .counter, labels: ["cgroup", "level"], help: "Asks to release, by service cgroup and level.")
    static let freedBytes = MemwarnMetric(
        "memwarn_agent_freed_bytes_total", .counter, labels: ["cgroup"],
        help: "Bytes freed by asks, by service cgroup, as the kernel measured the cgroup's usage fall.")
    static let lastAskFreed = MemwarnMetric(
        "memwarn_agent_last_ask_freed_bytes", .gauge, labels: ["cgroup"], help: "Bytes the kernel measured freed by the latest ask of each service.")
    static let unanswered = MemwarnMetric(
        "memwarn_agent_unanswered_total", .counter, labels: ["cgroup"], help: "Asks that timed out or failed, by service cgroup.")
    static let episodes = MemwarnMetric(
        "memwarn_agent_episodes_total", .counter, help: "Episodes: crossings of the parent's warning mark.")
    static let relief = MemwarnMetric(
        "memwarn_agent_relief_seconds", .gauge, help: "The latest episode's time from the crossing to back under the recovery mark.")

    /// Every family, in the article's order.
    package static let all = [services, unlinkedCgroups, parentUsage, parentLimit, asks, freedBytes, lastAskFreed, unanswered, episodes, relief]

    /// Each family, by name.
    static let byName = Dictionary(uniqueKeysWithValues: all.map { ($0.name, $0) })
}
