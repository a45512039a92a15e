import MemwarnSystem

// A report logged or interpolated reads as a sentence, not a struct dump: what a log line and an
// operator need are the level, what was wanted and freed, how long it took, who gave the most and
// who held memory in use.

extension ReleaseReport: CustomStringConvertible {
    /// One sentence: `critical release freed 30.2 MiB of 48.0 MiB wanted (8.0 MiB of it headroom
    /// for growth at 20.0 MiB/s) in 3.1 ms, from 3 consumers: thumbnails (caches) 28.0 MiB,
    /// sessions (caches) 2.2 MiB; in use: renders 12.0 MiB; heap returned to the kernel`.
    public var description: String {
        var text = "\(level) release freed \(Self.size(freedBytes)) of \(Self.size(targetBytes)) wanted"
        if headroomBytes > 0 {
            // The rate comes with the report, perhaps from another process: never trap on it.
            let rate = growthBytesPerSecond.isFinite ? Self.size(Int(max(-9e18, min(9e18, growthBytesPerSecond.rounded())))) + "/s" : "an unknown rate"
            text += " (\(Self.size(headroomBytes)) of it headroom for growth at \(rate))"
        }
        text += " in \(Self.time(duration))"
        let consumers = Set(entries.map(\.consumer)).count
        guard consumers > 0 else { return text + (targetBytes > 0 ? ": no consumer was asked (none registered)" : ": nothing was wanted") }
        text += ", from \(consumers) consumer\(consumers == 1 ? "" : "s")"
        let givers = entries.filter { $0.bytesFreed > 0 }.sorted { $0.bytesFreed > $1.bytesFreed }
        text +=
            givers.isEmpty
            ? ": none gave anything" : ": " + givers.prefix(5).map { "\($0.consumer) (\($0.tier)) \(Self.size($0.bytesFreed))" }.joined(separator: ", ")
        if givers.count > 5 { text += " and \(givers.count - 5) more" }
        let holding = entriesInUse
        if !holding.isEmpty { text += "; in use: " + holding.prefix(5).map { "\($0.consumer) \(Self.size($0.bytesInUse))" }.joined(separator: ", ") }
        if trimmedHeap { text += "; heap returned to the kernel" }
        return text
    }

    /// A size as a report shows it: bytes, KiB under a mebibyte, else MiB or GiB.
    static func size(_ bytes: Int) -> String {
        if bytes < 0 { return "-" + size(bytes == .min ? .max : -bytes) }
        if bytes < 1_024 { return "\(bytes) bytes" }
        if bytes < 1_048_576 { return "\(ByteSize.fixed(Double(bytes) / 1_024, decimals: 1)) KiB" }
        return ByteSize.describe(UInt64(bytes))
    }

    /// A duration as a report shows it: µs under a millisecond, ms under a second, else s.
    static func time(_ duration: Duration) -> String {
        let microseconds = duration.microseconds
        if microseconds < 1_000 { return "\(microseconds) µs" }
        if microseconds < 1_000_000 { return "\(ByteSize.fixed(Double(microseconds) / 1_000, decimals: 1)) ms" }
        return "\(ByteSize.fixed(duration.seconds, decimals: 2)) s"
    }
}

extension ReleaseReport.Entry: CustomStringConvertible {
    /// One clause: `thumbnails (caches) freed 28.0 MiB of the 30.0 MiB it held in 1.2 ms, 2.0 MiB in use`.
    public var description: String {
        var text = "\(consumer) (\(tier)) freed \(ReleaseReport.size(bytesFreed)) of the \(ReleaseReport.size(bytesBefore)) it held"
        text += " in \(ReleaseReport.time(duration))"
        if bytesInUse > 0 { text += ", \(ReleaseReport.size(bytesInUse)) in use" }
        return text
    }
}

extension MemoryExhaustion.Holder: CustomStringConvertible {
    /// `renders (media) 40.0 MiB, 38.0 MiB of it in use`; without the consumer's word on what
    /// is in use, `renders (media) 40.0 MiB`.
    public var description: String {
        var text = "\(consumer) (\(tier)) \(ReleaseReport.size(bytes))"
        if let inUseBytes { text += ", \(ReleaseReport.size(inUseBytes)) of it in use" }
        return text
    }
}
