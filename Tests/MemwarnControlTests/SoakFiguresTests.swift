import Foundation
import Logging
import MemwarnStores
import MemwarnSystem
import Testing

@testable import MemwarnControl
@testable import MemwarnMonitor
@testable import MemwarnRelease

/// The figures `memwarn soak` reads from a service — its coordinator's totals, the process's
/// memory, the status reply that carries them — and `MEMWARN_DISABLE`, the baseline's switch.
/// No cgroup is needed: a disabled monitor never reads one.
@Suite struct SoakFiguresTests {
    static let mebibyte = 1 << 20

    @Test func theCoordinatorCountsReleasesAboveNormalByTierAndConsumerWithABoundedSetOfNames() {
        var totals = ReleaseTotals()
        func report(_ level: MemoryPressureLevel, _ entries: [(String, ReleaseTier, Int)]) -> ReleaseReport {
            ReleaseReport(
                level: level, targetBytes: 1,
                entries: entries.map { .init(consumer: $0.0, tier: $0.1, bytesBefore: $0.2, bytesAfter: 0, bytesFreed: $0.2, duration: .zero) },
                trimmedHeap: false, duration: .zero)
        }
        totals.add(report(.normal, [("cache", .caches, 5)]))
        #expect(totals.releases == 0 && totals.freedBytesByTier.isEmpty, "a release at normal frees nothing and is not counted")
        totals.add(report(.warning, [("cache", .caches, 5), ("posters", .media, 7), ("idle", .caches, 0)]))
        totals.add(report(.critical, [("cache", .caches, 1)]))
        #expect(totals.releases == 2)
        #expect(totals.seconds == 0, "the releases above took no time")
        #expect(totals.freedBytesByTier == ["caches": 6, "media": 7])
        #expect(totals.freedBytesByConsumer == ["cache": 6, "posters": 7], "a consumer that freed nothing is not named")
        for index in 0..<(ReleaseTotals.maximumConsumerNames + 10) { totals.add(report(.warning, [("unit-\(index)", .suspendedUnits, 1)])) }
        #expect(totals.freedBytesByConsumer.count == ReleaseTotals.maximumConsumerNames + 1, "names past the bound are summed as one")
        #expect(totals.freedBytesByConsumer[ReleaseTotals.otherConsumers] == 12)
        #expect(totals.freedBytesByConsumer["cache"] == 6, "a name counted before keeps its own count")
    }

    @Test func aStatusReplyCarriesTheFiguresAndAnOlderReplyWithoutThemStillReads() throws {
        var status = ControlStatus(
            pid: 7, level: .warning, usageBytes: 10, limitBytes: 20, cgroupPath: "/x",
            consumers: [.init(name: "cache", tier: "caches", footprintBytes: 3)])
        status.released.releases = 2
        status.released.freedBytesByTier = ["caches": 4]
        status.released.freedBytesByConsumer = ["cache": 4]
        status.released.seconds = 0.25
        status.isMemoryExhausted = true
        status.forecasts.raised = 3
        status.forecasts.falseAlarms = 1
        status.process = ProcessMemory(residentBytes: 100, heapInUseBytes: 60)
        let line = ControlReply.status(status).line
        guard case .status(let read) = try ControlReply(line: Array(line.utf8)) else {
            Issue.record("not a status reply: \(line)")
            return
        }
        #expect(read.released == status.released && read.isMemoryExhausted && read.process == status.process)
        #expect(read.forecasts.raised == 3 && read.forecasts.falseAlarms == 1)
        let older = #"{"ok":true,"request":"status","pid":7,"level":"normal","usageBytes":null,"limitBytes":null,"cgroupPath":null,"consumers":[]}"#
        guard case .status(let old) = try ControlReply(line: Array(older.utf8)) else {
            Issue.record("an older status reply did not read")
            return
        }
        #expect(old.released == ReleaseTotals() && !old.isMemoryExhausted && old.process == nil)
    }

    /// The time a service spent releasing is its coordinator's sum of each
    /// release's duration, carried by the status reply; a reply's value that is no duration is
    /// refused, naming the field.
    @Test func theTimeSpentReleasingIsSummedAndCarriedAndANonsenseValueIsRefused() throws {
        var totals = ReleaseTotals()
        let release = ReleaseReport(level: .warning, targetBytes: 1, entries: [], trimmedHeap: false, duration: .milliseconds(250))
        totals.add(release)
        totals.add(release)
        totals.add(ReleaseReport(level: .normal, targetBytes: 1, entries: [], trimmedHeap: false, duration: .seconds(9)))
        #expect(abs(totals.seconds - 0.5) < 1e-9, "two releases above normal of 250 ms; one at normal is not counted: \(totals.seconds)")
        for bad in ["-1", "1e999"] {
            let line =
                #"{"ok":true,"request":"status","pid":7,"level":"normal","usageBytes":null,"limitBytes":null,"cgroupPath":null,"consumers":[],"releaseSeconds":"#
                + bad + "}"
            #expect(throws: (any Error).self, "releaseSeconds \(bad)") { try ControlReply(line: Array(line.utf8)) }
        }
    }

    @Test func theProcessMemoryIsThisProcesssOwn() throws {
        let before = try #require(ProcessMemory.current())
        let block = [UInt8](repeating: 1, count: 32 * Self.mebibyte)
        let after = try #require(ProcessMemory.current())
        if ProcessMemory.glibcMallocIsTheAllocator {
            #expect((after.heapInUseBytes ?? 0) >= (before.heapInUseBytes ?? .max) + UInt64(30 * Self.mebibyte), "a 32 MiB array is heap in use")
        } else {
            #expect(after.heapInUseBytes == nil, "another allocator (the thread sanitizer's): glibc's figure would be 0, so there is none")
        }
        #expect(after.residentBytes >= UInt64(32 * Self.mebibyte), "and resident, once written")
        withExtendedLifetime(block) {}
    }

    @Test(arguments: [("1", true), ("true", true), ("YES", true), ("on", true), ("0", false), ("", false), ("off", false), ("No", false)])
    func memwarnDisableReadsOnAndOff(value: String, disabled: Bool) throws {
        let configuration = MonitorConfiguration(environment: [MonitorConfiguration.disableVariable: value])
        #expect(try configuration.isDisabled() == disabled)
        #expect(try MonitorConfiguration(environment: [:]).isDisabled() == false)
    }

    @Test func aMonitorTurnedOffReadsNothingReportsNothingAndRunsUntilCancelled() async throws {
        let monitor = PressureMonitor(
            configuration: .init(cgroupPath: "/no/such/cgroup", environment: [MonitorConfiguration.disableVariable: "1"]),
            logger: .init(label: "test"))
        #expect(monitor.arming == nil && monitor.latestEvent == nil && monitor.level == .normal, "never armed: the cgroup, which does not exist, is never read")
        let events = monitor.events()
        let running = Task { try await monitor.run() }
        running.cancel()
        try await running.value  // returns on cancellation, without error
        var iterator = events.makeAsyncIterator()
        #expect(await iterator.next() == nil, "no level was ever reported, and the stream ended with the run")
    }

    @Test func anUnknownValueOfMemwarnDisableIsAnErrorThatNamesIt() async throws {
        let monitor = PressureMonitor(configuration: .init(environment: [MonitorConfiguration.disableVariable: "maybe"]), logger: .init(label: "test"))
        do {
            try await monitor.run()
            Issue.record("a monitor with MEMWARN_DISABLE=maybe ran")
        } catch let error as MonitorError {
            #expect(error.code == .badSetting && "\(error)".contains("MEMWARN_DISABLE=maybe"), "\(error)")
        }
        #expect(monitor.arming == nil, "it was never armed")
    }
}
