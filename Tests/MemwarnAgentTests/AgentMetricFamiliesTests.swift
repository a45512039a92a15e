import MemwarnAgent
import MemwarnTestKit
import Testing

/// The agent's families are the article's `memwarn_agent_` rows, no more and
/// no fewer, each with help text.
struct AgentMetricFamiliesTests {
    @Test func theAgentsFamiliesAreTheArticlesAgentRows() throws {
        let rows = try ArticleRows.metricsSeries().filter { $0.hasPrefix("memwarn_agent_") }
        let families = AgentMetricFamilies.all.map(\.name)
        #expect(rows == families, "article \(rows), agent \(families)")
        #expect(AgentMetricFamilies.all.allSatisfy { !$0.help.isEmpty && !$0.help.contains("\n") })
    }
}
