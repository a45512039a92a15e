/// Parsers for the value formats of cgroup files: a single number, a limit that may be
/// unlimited, and flat keyed files such as `memory.stat` and `memory.events`.
///
/// They never trap: empty, truncated, garbage or out-of-range input throws a
/// `CgroupError` with code `.malformed` naming the file.
package enum CgroupValues {
    /// The value cgroup v1 reports for "no limit" on x86-64 (`PAGE_COUNTER_MAX` in bytes,
    /// rounded down to a page). Any value at or above it means unlimited.
    package static let v1Unlimited: UInt64 = 9_223_372_036_854_771_712

    /// Parses a file holding one unsigned decimal number, such as `memory.usage_in_bytes`.
    ///
    /// - Parameters:
    ///   - text: the file's content; one trailing newline is allowed.
    ///   - path: the file's path, for the error message.
    /// - Returns: the number.
    /// - Throws: `CgroupError` `.malformed`.
    package static func number(_ text: String, path: String) throws(CgroupError) -> UInt64 {
        let value = trimmed(text)
        guard !value.isEmpty else { throw CgroupError(.malformed, "empty; expected a number", path: path) }
        guard let number = UInt64(value) else {
            throw CgroupError(.malformed, "expected an unsigned number, found \"\(preview(value))\"", path: path)
        }
        return number
    }

    /// Parses a limit file (`memory.max`, `memory.high`, `memory.limit_in_bytes`).
    ///
    /// "Unlimited" in all its spellings gives `nil`: `max` (v2), `-1` (as written), and any
    /// number at or above ``v1Unlimited`` (v1).
    ///
    /// - Parameters:
    ///   - text: the file's content.
    ///   - path: the file's path, for the error message.
    /// - Returns: the limit in bytes, or `nil` when there is none.
    /// - Throws: `CgroupError` `.malformed`.
    package static func limit(_ text: String, path: String) throws(CgroupError) -> UInt64? {
        let value = trimmed(text)
        if value == "max" || value == "-1" { return nil }
        let bytes = try number(value, path: path)
        return bytes >= v1Unlimited ? nil : bytes
    }

    /// Parses a flat keyed file: one `key value` pair a line (`memory.stat`, `memory.events`,
    /// `memory.oom_control`). Keys are kept by name; never rely on their order.
    ///
    /// - Parameters:
    ///   - text: the file's content.
    ///   - path: the file's path, for the error message.
    /// - Returns: the values by key.
    /// - Throws: `CgroupError` `.malformed` for a line without a value, a value that is not
    ///   an unsigned number, or a repeated key.
    package static func flatKeyed(_ text: String, path: String) throws(CgroupError) -> [String: UInt64] {
        var values: [String: UInt64] = [:]
        var lineNumber = 0
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            lineNumber += 1
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            if fields.isEmpty { continue }
            guard fields.count == 2 else {
                throw CgroupError(.malformed, "line \(lineNumber) is not \"key value\": \"\(preview(line))\"", path: path)
            }
            guard let value = UInt64(fields[1]) else {
                throw CgroupError(.malformed, "line \(lineNumber): \"\(preview(fields[1]))\" is not an unsigned number", path: path)
            }
            let key = String(fields[0])
            guard values.updateValue(value, forKey: key) == nil else {
                throw CgroupError(.malformed, "line \(lineNumber): key \"\(key)\" appears twice", path: path)
            }
        }
        guard !values.isEmpty else { throw CgroupError(.malformed, "empty; expected \"key value\" lines", path: path) }
        return values
    }

    static func trimmed(_ text: some StringProtocol) -> String {
        var value = Substring(text)
        while let last = value.last, last.isWhitespace { value = value.dropLast() }
        while let first = value.first, first.isWhitespace { value = value.dropFirst() }
        return String(value)
    }

    /// The start of a value, for an error message that stays one line.
    static func preview(_ text: some StringProtocol) -> String {
        let flat = text.prefix(40).map { $0.isNewline ? " " : $0 }
        return String(flat) + (text.count > 40 ? "…" : "")
    }
}
