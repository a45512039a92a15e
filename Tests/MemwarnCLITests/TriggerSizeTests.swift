import Foundation
import MemwarnTestKit
import Testing

extension TriggerCommandTests {
    /// `--target-bytes` takes a size as `--memory-max` does (`70M`), and bytes as before.
    @Test func targetBytesTakesASizeWithAUnit() async throws {
        try await Self.withServingProbe { probe, runtime in
            let result = try runtime.trigger(["--pid", "\(probe.pid)", "--target-bytes", "70M", "--json"])
            #expect(result.status == 0, "\(result.standardError)")
            let reply = try Self.object(result.standardOutput.trimmingCharacters(in: .newlines))
            let report = try #require(reply["report"] as? [String: Any])
            #expect(report["targetBytes"] as? Int == 70 * Self.mebibyte)
            #expect(report["freedBytes"] as? Int == 70 * Self.mebibyte)
            #expect(try Self.entries(report).map(\.consumer) == ["sessions", "thumbnails"], "fragments were not needed for 70 MiB")

            let nothing = try runtime.trigger(["--pid", "\(probe.pid)", "--target-bytes", "0", "--json"])
            #expect(nothing.status == 0, "\(nothing.standardError)")
            let zero = try #require(try Self.object(nothing.standardOutput.trimmingCharacters(in: .newlines))["report"] as? [String: Any])
            #expect(zero["targetBytes"] as? Int == 0)
        }
    }

    @Test(arguments: ["64X", "lots", "-5M", "5.5.5"])
    func targetBytesThatIsNoSizeIsRefusedInOneLine(size: String) throws {
        let runtime = Runtime()
        defer { runtime.remove() }
        let result = try runtime.trigger(["--all", "--target-bytes", size])
        #expect(result.status == 64, "\(size)")
        #expect(result.standardError.hasPrefix("Error: "), "\(size): \(result.standardError)")
        #expect(result.standardOutput.isEmpty)
    }
}
