import MemwarnMonitor
import MemwarnRelease
import MemwarnStores
import Testing

/// A report that is logged reads as a sentence, not a struct dump.
struct ReleaseReportDescriptionTests {
    static let mebibyte = 1 << 20

    @Test func aReportPrintsAsASentenceWithTheLargestGiversAndWhoHeldMemoryInUse() {
        let entries = [
            ReleaseReport.Entry(
                consumer: "thumbnails", tier: .caches, bytesBefore: 30 * Self.mebibyte, bytesAfter: 2 * Self.mebibyte,
                bytesFreed: 28 * Self.mebibyte, duration: .microseconds(1_200)),
            ReleaseReport.Entry(
                consumer: "renders", tier: .media, bytesBefore: 12 * Self.mebibyte, bytesAfter: 12 * Self.mebibyte, bytesFreed: 0,
                duration: .microseconds(40), bytesInUse: 12 * Self.mebibyte),
            ReleaseReport.Entry(
                consumer: "sessions", tier: .caches, bytesBefore: 3 * Self.mebibyte, bytesAfter: 0, bytesFreed: 3 * Self.mebibyte - 512,
                duration: .microseconds(300)),
        ]
        let report = ReleaseReport(
            level: .critical, targetBytes: 48 * Self.mebibyte, headroomBytes: 8 * Self.mebibyte, growthBytesPerSecond: Double(20 * Self.mebibyte),
            entries: entries, trimmedHeap: true, duration: .microseconds(3_100))
        #expect(
            "\(report)"
                == "critical release freed 31.0 MiB of 48.0 MiB wanted (8.0 MiB of it headroom for growth at 20.0 MiB/s) in 3.1 ms, "
                + "from 3 consumers: thumbnails (caches) 28.0 MiB, sessions (caches) 3.0 MiB; in use: renders 12.0 MiB; heap returned to the kernel")
        #expect("\(entries[1])" == "renders (media) freed 0 bytes of the 12.0 MiB it held in 40 µs, 12.0 MiB in use")
        let empty = ReleaseReport(level: .warning, targetBytes: 4_096, entries: [], trimmedHeap: false, duration: .microseconds(5))
        #expect("\(empty)" == "warning release freed 0 bytes of 4.0 KiB wanted in 5 µs: no consumer was asked (none registered)")
        let nothing = ReleaseReport(level: .warning, targetBytes: 0, entries: [], trimmedHeap: false, duration: .microseconds(5))
        #expect("\(nothing)" == "warning release freed 0 bytes of 0 bytes wanted in 5 µs: nothing was wanted")
    }

    @Test func anExhaustionHolderSaysWhatOfItIsInUseWhenTheConsumerSays() {
        var holder = MemoryExhaustion.Holder(consumer: "pool", tier: .sharedResources, bytes: 40 * Self.mebibyte)
        #expect("\(holder)" == "pool (shared-resources) 40.0 MiB")
        holder.inUseBytes = 38 * Self.mebibyte
        #expect("\(holder)" == "pool (shared-resources) 40.0 MiB, 38.0 MiB of it in use")
    }
}
