import Foundation
import MemwarnSystem

/// What the demo service said about itself, read from its JSON event lines.
package struct DemoRecord: Sendable, Codable {
    /// One release the demo's coordinator made.
    package struct Release: Sendable, Codable, Hashable {
        package var seconds: Double
        package var level: String
        package var freedBytes: Int
        package var bytesByTier: [String: Int]
    }

    /// One suspended unit memwarn terminated.
    package struct Termination: Sendable, Codable, Hashable {
        package var seconds: Double
        package var unit: String
        package var freedBytes: Int
    }

    /// The demo's monitor found memory exhausted: its floor, usage, capacity and growth.
    package struct Exhaustion: Sendable, Codable, Hashable {
        package var seconds: Double
        package var floorBytes: Int
        package var capacityBytes: Int
        package var growthBytesPerSecond: Int
    }

    package var releases: [Release] = []
    package var exhaustions: [Exhaustion] = []
    /// New users turned away while memory was exhausted (the last count seen).
    package var turnedAway = 0
    /// Forecast warnings the demo's monitor raised, and those whose growth did not come.
    package var forecastWarnings: Int?
    package var falseForecasts: Int?
    package var terminations: [Termination] = []
    /// The last progress line's write count (writes acknowledged so far).
    package var writesAcknowledgedSoFar = 0
    /// The summary's figures, present when the demo finished.
    package var writesAcknowledged: Int?
    package var writesVerified: Int?
    package var lostWrites: Int?
    package var users: Int?
    /// Lines that were not demo events (kept, so nothing is silently lost).
    package var otherLines: [String] = []

    package init() {}

    /// Bytes released, summed by tier.
    package var releasedByTier: [String: Int] {
        releases.reduce(into: [:]) { sums, release in
            // The demo's lines are another process's word: summed without trapping.
            for (tier, bytes) in release.bytesByTier { sums[tier] = sums[tier, default: 0].addingSaturating(bytes) }
        }
    }

    /// Takes one line of the demo's output.
    package mutating func read(_ line: String) {
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
