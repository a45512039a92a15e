import Foundation
import MemwarnSystem

/// What the demo service said about itself, read from its JSON event lines.
public struct DemoRecord: Sendable, Codable {
    /// One release the demo's coordinator made.
    public struct Release: Sendable, Codable, Hashable {
        public var seconds: Double
        public var level: String
        public var freedBytes: Int
        public var bytesByTier: [String: Int]
    }

    /// One suspended unit memwarn terminated.
    public struct Termination: Sendable, Codable, Hashable {
        public var seconds: Double
        public var unit: String
        public var freedBytes: Int
    }

    /// The demo's monitor found memory exhausted: its floor, usage, capacity and growth.
    public struct Exhaustion: Sendable, Codable, Hashable {
        public var seconds: Double
        public var floorBytes: Int
        public var capacityBytes: Int
        public var growthBytesPerSecond: Int
    }

    public var releases: [Release] = []
    public var exhaustions: [Exhaustion] = []
    /// New users turned away while memory was exhausted (the last count seen).
    public var turnedAway = 0
    /// Forecast warnings the demo's monitor raised, and those whose growth did not come.
    public var forecastWarnings: Int?
    public var falseForecasts: Int?
    public var terminations: [Termination] = []
    /// The last progress line's write count (writes acknowledged so far).
    public var writesAcknowledgedSoFar = 0
    /// The summary's figures, present when the demo finished.
    public var writesAcknowledged: Int?
    public var writesVerified: Int?
    public var lostWrites: Int?
    public var users: Int?
    /// Lines that were not demo events (kept, so nothing is silently lost).
    public var otherLines: [String] = []

    public init() {}

    /// Bytes released, summed by tier.
    public var releasedByTier: [String: Int] {
        releases.reduce(into: [:]) { sums, release in
            // The demo's lines are another process's word: summed without trapping.
            for (tier, bytes) in release.bytesByTier { sums[tier] = sums[tier, default: 0].addingSaturating(bytes) }
        }
    }

    /// Takes one line of the demo's output.
    public mutating func read(_ line: String) {
        guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
            let event = object["event"] as? String
        else {
            if !line.isEmpty { otherLines.append(line) }
            return
        }
        let seconds = object["t"] as? Double ?? 0
        switch event {
        case "release":
            releases.append(
                Release(
                    seconds: seconds, level: object["level"] as? String ?? "?", freedBytes: object["freed"] as? Int ?? 0,
                    bytesByTier: object["tiers"] as? [String: Int] ?? [:]))
        case "exhausted":
            exhaustions.append(
                Exhaustion(
                    seconds: seconds, floorBytes: object["floor"] as? Int ?? 0, capacityBytes: object["capacity"] as? Int ?? 0,
                    growthBytesPerSecond: object["growth"] as? Int ?? 0))
        case "turned-away":
            turnedAway += 1
        case "terminated":
            terminations.append(Termination(seconds: seconds, unit: object["unit"] as? String ?? "?", freedBytes: object["freed"] as? Int ?? 0))
        case "progress":
            writesAcknowledgedSoFar = object["writes"] as? Int ?? writesAcknowledgedSoFar
        case "summary":
            writesAcknowledged = object["writesAcknowledged"] as? Int
            writesVerified = object["writesVerified"] as? Int
            lostWrites = object["lostWrites"] as? Int
            users = object["users"] as? Int
            turnedAway = object["turnedAway"] as? Int ?? turnedAway
            forecastWarnings = object["forecastWarnings"] as? Int
            falseForecasts = object["falseForecasts"] as? Int
        default:
            break
        }
    }
}
