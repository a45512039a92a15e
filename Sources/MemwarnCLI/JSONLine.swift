import Foundation

/// One JSON object on one line, keys sorted, as `status`, `watch`, `run` and `agent` print with
/// `--json`. A wall-clock time in one (`watch`'s and the agent's `time`) is ISO 8601
/// (`ISO8601Time`), the same in every line.
enum JSONLine {
    static func encode(_ value: some Encodable) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try encoder.encode(value), as: UTF8.self)
    }
}
