extension MemwarnMetric {
    /// `exposition` (Prometheus's text format 0.0.4, as swift-prometheus and most clients write
    /// it; not OpenMetrics) with a `# HELP` line for each of memwarn's families that has none,
    /// put right before the family's `# TYPE` line (or, with no `# TYPE`, its first sample).
    /// Everything else is left as it was, byte for byte: other families, a family that already has
    /// help wherever its `# HELP` line stands, and text that is not a family of `families`.
    ///
    /// - Parameters:
    ///   - exposition: a scrape's text, as a Prometheus client writes it.
    ///   - families: the families to give help to (``all`` by default).
    /// - Returns: the text with the help lines added.
    /// - Complexity: O(n) in the text's length.
    public static func addingHelp(to exposition: String, for families: [MemwarnMetric] = all) -> String {
        let help = Dictionary(families.map { ($0.name, $0.help) }, uniquingKeysWith: { first, _ in first })
        let timers = Set(families.filter { $0.kind == .timer }.map(\.name))
        let lines = exposition.split(separator: "\n", omittingEmptySubsequences: false)
        // Families that have help already, wherever the line stands (before or after its TYPE).
        var helped = Set(lines.lazy.filter { $0.hasPrefix("# HELP ") }.map { String($0.dropFirst(7).prefix { $0 != " " }) })
        var written: [Substring] = []
        written.reserveCapacity(lines.count + help.count)
        for line in lines {
            let name: String?
            if line.hasPrefix("# TYPE ") {
                name = String(line.dropFirst(7).prefix { $0 != " " })
            } else if line.hasPrefix("#") || line.isEmpty {
                name = nil
            } else {
                name = Self.family(of: line.prefix { $0 != "{" && $0 != " " }, help: help, timers: timers)
            }
            if let name, let text = help[name], helped.insert(name).inserted {
                written.append(Substring(Self.helpLine(name, text)))
            }
            written.append(line)
        }
        return written.joined(separator: "\n")
    }

    /// The family a sample line belongs to: its own name, or — for a timer's histogram — the name
    /// less `_bucket`, `_sum` or `_count` (only a timer's: `memwarn_level_count` is not
    /// `memwarn_level`'s).
    private static func family(of sample: Substring, help: [String: String], timers: Set<String>) -> String {
        let name = String(sample)
        guard help[name] == nil else { return name }
        for suffix in ["_bucket", "_sum", "_count"] where sample.hasSuffix(suffix) {
            let base = String(sample.dropLast(suffix.count))
            if timers.contains(base) { return base }
        }
        return name
    }

    /// The family's `# HELP` line, its text escaped (what the agent's metrics file writes too).
    package var helpLine: String { Self.helpLine(name, help) }

    private static func helpLine(_ name: String, _ text: String) -> String { "# HELP \(name) \(escaped(text))" }

    /// Help text as the format escapes it: a backslash and a line feed.
    private static func escaped(_ text: String) -> String {
        var escaped = ""
        for character in text {
            switch character {
            case "\\": escaped += "\\\\"
            case "\n": escaped += "\\n"
            default: escaped.append(character)
            }
        }
        return escaped
    }
}
