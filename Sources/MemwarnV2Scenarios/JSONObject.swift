import Foundation

/// One line of JSON output (`memwarn status --json`, `watch --json`, the probes' replies) as
/// a dictionary.
enum JSONObject {
    /// Parses `line` as a JSON object.
    ///
    /// - Throws: ``ScenarioFailure`` when it is not one.
    static func parse(_ line: String) throws(ScenarioFailure) -> [String: Any] {
        guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else {
            throw ScenarioFailure("not a JSON object: \(line.prefix(300))")
        }
        return object
    }
}
