import Testing

@testable import MemwarnSoak

/// A newcomer's soak blamed "releases did not keep up" where buffers held by
/// running renders were the cause. With the consumers' bytes in use, the reason names them.
struct InUseKillReasonTests {
    static let mebibyte = 1 << 20

    static func figures(_ consumers: [ServiceTelemetry.Consumer]) -> ServiceTelemetry {
        var figures = ServiceTelemetry()
        figures.linksMemwarn = true
        figures.lastConsumers = consumers
        return figures
    }

    @Test func memoryMostlyInUseIsBlamedNotTheReleases() {
        let reason = SoakRun.unexhaustedKillReason(
            Self.figures([
                .init(name: "render-buffers", tier: "caches", footprintBytes: 40 * Self.mebibyte, inUseBytes: 38 * Self.mebibyte),
                .init(name: "results", tier: "caches", footprintBytes: 4 * Self.mebibyte, inUseBytes: nil),
            ]))
        #expect(
            reason
                == "killed with no exhaustion reported: at the endpoint's last answer the consumers held 44.0 MiB, 38.0 MiB of it in use "
                + "(render-buffers 38.0 MiB), which no release can give: the work in flight outgrew the limit, not the releases")
    }

    @Test func releasableMemoryLeftStillBlamesTheReleasesAndSaysWhatWasInUse() {
        let reason = SoakRun.unexhaustedKillReason(
            Self.figures([.init(name: "pool", tier: "caches", footprintBytes: 40 * Self.mebibyte, inUseBytes: 4 * Self.mebibyte)]))
        #expect(reason.hasPrefix("killed with no exhaustion reported: releasable memory was left (36.0 MiB of the consumers' 40.0 MiB"))
        #expect(reason.hasSuffix("4.0 MiB more was in use (pool 4.0 MiB)"))
    }

    @Test func withoutTheConsumersWordTheReasonIsTheOldOne() {
        let reason = SoakRun.unexhaustedKillReason(
            Self.figures([.init(name: "cache", tier: "caches", footprintBytes: 40 * Self.mebibyte, inUseBytes: nil)]))
        #expect(reason == "killed with no exhaustion reported: releasable memory was left, and the releases did not keep up with growth")
    }
}
