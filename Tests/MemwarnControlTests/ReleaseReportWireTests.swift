import Foundation
import MemwarnRelease
import Testing

@testable import MemwarnControl

/// A release report as the control endpoint sends it (`memwarn trigger`'s reply).
struct ReleaseReportWireTests {
    @Test func theInUseFigureCrossesTheControlWire() throws {
        let entry = ReleaseReport.Entry(consumer: "pinned", tier: .caches, bytesBefore: 10, bytesAfter: 10, bytesFreed: 0, duration: .zero, bytesInUse: 10)
        let report = ReleaseReport(level: .warning, targetBytes: 5, entries: [entry], trimmedHeap: false, duration: .zero)
        let decoded = try JSONDecoder().decode(ReleaseReport.self, from: JSONEncoder().encode(report))
        #expect(decoded.entriesInUse.first?.bytesInUse == 10)
    }
}
