import Foundation
import Testing

@testable import MemwarnSoak

/// A floor sample pairs the consumers' footprint (the service's status) with the cgroup's
/// anonymous memory, read on both sides of the status: a poll with a release between the reads
/// gives no sample. The v2 VM's 10 s soak of its own service once reported a floor of 0 bytes:
/// a footprint from before a release less memory from after it.
@Suite struct FloorPairingTests {
    static let mebibyte: UInt64 = 1 << 20
    static let limit: UInt64 = 128 << 20

    /// A service of 30 MiB that cannot be released plus a cache filling at 20 MiB/s, which a
    /// release halves whenever the whole reaches 80 % of 128 MiB (every 1.8 s). Each poll's
    /// reads are `gap` seconds apart: anonymous memory, the status (footprint), anonymous memory
    /// again.
    struct SawtoothService {
        let floor = 30.0
        let rate = 20.0
        let mark = 0.8 * 128

        /// The cache's size at `t` seconds, in MiB.
        func cache(at t: Double) -> Double {
            var cache = 0.0
            var now = 0.0
            while true {
                let untilMark = (mark - floor - cache) / rate
                if now + untilMark > t { return cache + (t - now) * rate }
                now += untilMark
                cache = (mark - floor) / 2
            }
        }

        func bytes(_ mebibytes: Double) -> UInt64 { UInt64(mebibytes * Double(FloorPairingTests.mebibyte)) }

        func poll(at t: Double, gap: Double) -> MemoryTrend.Sample? {
            MemoryTrend.Sample.paired(
                seconds: t + 2 * gap, anonymousBefore: bytes(floor + cache(at: t)), anonymousAfter: bytes(floor + cache(at: t + 2 * gap)),
                footprintBytes: bytes(cache(at: t + gap)), heapFloorBytes: nil, limitBytes: FloorPairingTests.limit)
        }
    }

    @Test func aPollWithAReleaseBetweenItsReadsGivesNoSampleAndTheFloorHolds() {
        let service = SawtoothService()
        var samples: [MemoryTrend.Sample] = []
        var leftOut = 0
        var unpairedFloors: [UInt64] = []
        // A poll every 0.37 s (every phase of the release cycle), 60 ms between reads (a slow
        // VM's status): some straddle a release.
        for poll in 0..<200 {
            let t = Double(poll) * 0.37
            let gap = 0.06
            if let sample = service.poll(at: t, gap: gap) { samples.append(sample) } else { leftOut += 1 }
            // What one read after the status gave before: the footprint less the memory after it.
            let after = service.bytes(service.floor + service.cache(at: t + 2 * gap))
            let footprint = service.bytes(service.cache(at: t + gap))
            unpairedFloors.append(after > footprint ? after - footprint : 0)
        }
        // The setup's own check: the bench has polls that straddle a release, which read once
        // after the status show a floor far below 30 MiB.
        #expect(unpairedFloors.contains { $0 < 10 * Self.mebibyte }, "the bench straddles a release")
        #expect(leftOut > 0 && leftOut < 40, "the straddling polls are left out, and only they: \(leftOut) of 200")
        let lowest = samples.map(\.floorBytes).min() ?? 0
        #expect(lowest >= 30 * Self.mebibyte, "every sample kept is at least the floor: \(Double(lowest) / Double(Self.mebibyte)) MiB")
        #expect(lowest <= 33 * Self.mebibyte, "and within a read's growth of it: \(Double(lowest) / Double(Self.mebibyte)) MiB")
    }

    @Test func growthBetweenTheReadsKeepsTheSampleFromTheLaterRead() {
        let paired = MemoryTrend.Sample.paired(
            seconds: 4, anonymousBefore: 60 * Self.mebibyte, anonymousAfter: 62 * Self.mebibyte, footprintBytes: 20 * Self.mebibyte,
            heapFloorBytes: 5 * Self.mebibyte, limitBytes: Self.limit)
        #expect(paired == .init(seconds: 4, floorBytes: 42 * Self.mebibyte, heapFloorBytes: 5 * Self.mebibyte))
    }

    @Test func aFallUnderOnePercentOfTheLimitIsNotARelease() {
        let smallest = MemoryTrend.smallestFall(limitBytes: Self.limit)
        let justUnder = MemoryTrend.Sample.paired(
            seconds: 1, anonymousBefore: 60 * Self.mebibyte, anonymousAfter: 60 * Self.mebibyte - (smallest - 1), footprintBytes: 0,
            heapFloorBytes: nil, limitBytes: Self.limit)
        #expect(justUnder == .init(seconds: 1, floorBytes: 60 * Self.mebibyte - (smallest - 1), heapFloorBytes: nil))
        let atIt = MemoryTrend.Sample.paired(
            seconds: 1, anonymousBefore: 60 * Self.mebibyte, anonymousAfter: 60 * Self.mebibyte - smallest, footprintBytes: 0,
            heapFloorBytes: nil, limitBytes: Self.limit)
        #expect(atIt == nil)
    }

    @Test func withoutAStatusTheSampleIsTheAnonymousMemoryWhateverFell() {
        let paired = MemoryTrend.Sample.paired(
            seconds: 2, anonymousBefore: 90 * Self.mebibyte, anonymousAfter: 50 * Self.mebibyte, footprintBytes: nil, heapFloorBytes: nil,
            limitBytes: Self.limit)
        #expect(paired == .init(seconds: 2, floorBytes: 50 * Self.mebibyte, heapFloorBytes: nil))
    }

    @Test func theLoadedServicesTrendCountsThePollsLeftOutWhileLoaded() {
        var telemetry = ServiceTelemetry()
        telemetry.linksMemwarn = true
        telemetry.floorSamples = (0..<30).map { .init(seconds: Double($0), floorBytes: 40 * Self.mebibyte, heapFloorBytes: nil) }
        telemetry.floorSamplesLeftOut = [0.5, 3.5, 12.5, 29.5]
        let trend = MemoryTrend.ofLoadedService(telemetry, levelChanges: [], from: 1, until: 29, limitBytes: Self.limit)
        #expect(trend.samplesLeftOut == 2, "3.5 and 12.5 fall while loaded; 0.5 before ready, 29.5 after the stop began")
        #expect(trend.floorBytes == 40 * Self.mebibyte)
    }

    /// The watch's poll reads anonymous memory on both sides of the status: a release while the
    /// service answers (here, inside the status call) is seen, and the poll gives no sample.
    @Test func thePollReadsAnonymousMemoryOnBothSidesOfTheStatus() {
        final class Service {
            var anonymous: UInt64 = 100 << 20
            var cache: UInt64 = 80 << 20
        }
        let service = Service()
        let answerThenRelease = { () -> UInt64? in
            defer { (service.anonymous, service.cache) = (service.anonymous - (40 << 20), service.cache - (40 << 20)) }  // released after answering
            return service.cache
        }
        let reads = ServiceWatch.readAround(anonymous: { service.anonymous }, status: answerThenRelease)
        #expect(reads.before == 100 << 20 && reads.status == 80 << 20 && reads.after == 60 << 20, "\(reads)")
        let sample = MemoryTrend.Sample.paired(
            seconds: 1, anonymousBefore: reads.before ?? 0, anonymousAfter: reads.after ?? 0, footprintBytes: reads.status, heapFloorBytes: nil,
            limitBytes: Self.limit)
        #expect(sample == nil, "80 MiB of footprint less 60 MiB of memory is no floor")
    }
}
