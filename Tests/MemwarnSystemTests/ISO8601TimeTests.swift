import Foundation
import MemwarnSystem
import Testing

/// Every JSON line of memwarn's tools writes its time one way: ISO 8601, as
/// `memwarn watch` did (the agent wrote epoch seconds).
@Suite struct ISO8601TimeTests {
    nonisolated(unsafe) static let reader: ISO8601DateFormatter = {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter
    }()

    @Test(arguments: [
        (Duration.zero, "1970-01-01T00:00:00.000Z"), (.seconds(1_795_306_891) + .milliseconds(481), "2026-11-22T00:21:31.481Z"),
        (.seconds(951_782_400) + .microseconds(999_999), "2000-02-29T00:00:00.999Z"), (.milliseconds(-1), "1969-12-31T23:59:59.999Z"),
    ])
    func aTimeIsWrittenInUTCToTheMillisecond(sinceEpoch: Duration, written: String) {
        #expect(ISO8601Time.string(sinceEpoch: sinceEpoch) == written)
    }

    @Test func nowReadsBackAsTheWallClockNow() throws {
        let before = Date()
        let now = try #require(Self.reader.date(from: ISO8601Time.now()))
        #expect(now.timeIntervalSince(before) > -0.002 && now.timeIntervalSince(before) < 5)
    }
}
