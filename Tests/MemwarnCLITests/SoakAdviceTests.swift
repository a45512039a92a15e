import Foundation
import MemwarnTestKit
import Testing

extension RunCommandTests.SoakServiceTests {
    // MARK: The soak's advice: a bounded cache, memwarn off, the default 60 s

    /// As the trial soaked it: a cache capped at 32 MiB that memwarn never sees (the probe's
    /// `--bounded-cache`, `--releaser none`: no monitor, no control endpoint), at two limits, for the
    /// default 60 s. Its floor climbs as the cache fills (1 − e^(−t/26 s): 128 entries of 256 KiB,
    /// five random lookups a second) and slows as it nears its cap: never a leak. The report names
    /// what ran — the service without memwarn, never "with memwarn" — judges thrashing on a 30 s
    /// window, and recommends a limit for the service as it ran.
    @Test func aBoundedCacheWithoutMemwarnIsNotALeakAndTheReportNamesWhatRan() async throws {
        let result = try await Self.soak([
            "--limits", "96M,128M", "--duration", "60s", "--ready-after", "1s", "--no-baseline", "--",
            Self.probe, "--releaser", "none", "--bounded-cache", "32", "--entry-kib", "256", "--lookups", "5",
        ])
        #expect(result.status == 0, "\(result.errors)")
        let text = result.output
        #expect(!text.contains("with memwarn"), "memwarn was not in the service: \(text)")
        let lines = text.split(separator: "\n").map(String.init)
        let trend = try #require(lines.first { $0.hasPrefix("trend without memwarn: ") }, "\(text)")
        #expect(
            trend.hasPrefix("trend without memwarn: cannot tell yet") || trend.hasPrefix("trend without memwarn: warming up")
                || trend.hasPrefix("trend without memwarn: steady"), "a cache filling to its cap is not a leak: \(text)")
        #expect(!text.contains("leaking"), "\(text)")
        #expect(lines.contains { $0.hasPrefix("lowest limit survived: without memwarn 96.0 MiB") }, "\(text)")
        #expect(
            lines.contains { $0.hasPrefix("recommended limit, with a 25 % margin, for the service without memwarn: 120.0 MiB") },
            "judged on a 60 s run, recommended as what it is: \(text)")
        #expect(try Self.soakCgroups(of: result.pid).isEmpty)
    }
}
