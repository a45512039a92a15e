import CgroupKit
import MemwarnSystem

#if canImport(Glibc)
import Glibc
#endif

extension PressurePolicy {
    /// The environment variable naming a policy file.
    package static let configFileVariable = "MEMWARN_CONFIG"

    /// Loads the policy: the defaults, then a file's settings, then `MEMWARN_<KEY>`
    /// environment variables (for example `MEMWARN_WARNING_RATIO=0.75`).
    ///
    /// The file format is `key = value` lines, `#` comments and blank lines; durations take a
    /// unit (`250ms`, `2s`). `Config/memwarn.conf` documents every key. A file given
    /// explicitly must exist; an unknown key, a bad value or an inconsistent result is an error.
    ///
    /// - Parameters:
    ///   - file: a policy file; `nil` uses `MEMWARN_CONFIG` when set, else no file.
    ///   - environment: the variables to read overrides from.
    /// - Returns: the policy, validated.
    /// - Throws: ``PolicyError`` naming the file and line or the variable.
    public static func load(file: String? = nil, environment: [String: String]) throws(PolicyError) -> PressurePolicy {
        var policy = PressurePolicy()
        if let path = file ?? environment[configFileVariable] {
            // A FIFO or a device would hang the read or feed it without end: only a file will do.
            if let type = FileType.at(path), type != .regular {
                throw PolicyError(.unreadableFile, "policy file \(path): not a regular file")
            }
            let text: String
            do {
                text = try KernelFiles.host.read(path)
            } catch {
                throw PolicyError(.unreadableFile, "policy file \(error)")
            }
            try policy.apply(fileText: text, path: path)
        }
        for key in Self.keys {
            let variable = "MEMWARN_" + key.uppercased()
            if let value = environment[variable] {
                try policy.set(key, to: value, origin: "environment variable \(variable)")
            }
        }
        do {
            try policy.validate()
        } catch {
            throw PolicyError(error.code, "policy \(file ?? environment[configFileVariable] ?? "(defaults and environment)"): \(error.message)")
        }
        return policy
    }

    /// Applies the settings of a policy file's text.
    ///
    /// - Parameters:
    ///   - fileText: the file's text, in the format ``load(file:environment:)`` reads.
    ///   - path: the file's path, named in errors.
    /// - Throws: ``PolicyError`` naming the path and line of a line that is not a setting, an
    ///   unknown key or a bad value; the settings of the lines before it are applied.
    package mutating func apply(fileText: String, path: String) throws(PolicyError) {
        var lineNumber = 0
        // Any line break: "\r\n" (a file written on Windows) is one Character, not a "\n", and a
        // file split on "\n" alone would be one line — a comment, if it starts with one.
        for rawLine in fileText.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline) {
            lineNumber += 1
            let line = rawLine.prefix { $0 != "#" }.trimmingWhitespace()
            if line.isEmpty { continue }
            let parts = line.split(separator: "=", maxSplits: 1)
            // The line is not quoted back: a file given by mistake (or by someone else) may hold secrets.
            guard parts.count == 2 else { throw PolicyError(.notASetting, "\(path):\(lineNumber): expected \"key = value\" (this line is not a setting)") }
            try set(parts[0].trimmingWhitespace(), to: parts[1].trimmingWhitespace(), origin: "\(path):\(lineNumber)")
        }
    }

    /// A setting's text as an error may show it: quoted when it is short and plain (a typo to
    /// fix), withheld otherwise (a line of a file that is not a policy file, control characters).
    static func quoted(_ text: String) -> String {
        let plain = text.count <= 40 && text.unicodeScalars.allSatisfy { $0.isASCII && $0.value >= 0x20 && $0.value < 0x7f }
        return plain ? "\"\(text)\"" : "a value of \(text.utf8.count) bytes (not shown)"
    }

    /// The keys a policy file and `MEMWARN_*` variables may set.
    package static let keys = [
        "warning_ratio", "critical_ratio", "recovery_ratio", "psi_some_warning_percent", "psi_full_critical_percent",
        "psi_window", "hold_time", "recheck_interval", "poll_interval", "pressure_level_quiet_time",
        "forecast_horizon", "growth_window", "worst_case_growth", "ancestor_limits", "inactive_page_cache", "trim_interval", "trim_step_percent",
        "trim_stall_percent",
    ]

    /// Sets one setting by its file key.
    package mutating func set(_ key: String, to value: String, origin: String) throws(PolicyError) {
        func number() throws(PolicyError) -> Double {
            guard let number = Double(value), number.isFinite else {
                throw PolicyError(.badValue, "\(origin): \(key) must be a number, is \(Self.quoted(value))")
            }
            return number
        }
        func duration() throws(PolicyError) -> Duration {
            guard let duration = Self.duration(value) else {
                throw PolicyError(.badValue, "\(origin): \(key) must be a duration such as 250ms or 2s, is \(Self.quoted(value))")
            }
            return duration
        }
        switch key {
        case "warning_ratio": warningRatio = try number()
        case "critical_ratio": criticalRatio = try number()
        case "recovery_ratio": recoveryRatio = try number()
        case "psi_some_warning_percent": psiSomeWarningPercent = try number()
        case "psi_full_critical_percent": psiFullCriticalPercent = try number()
        case "psi_window": psiWindow = try duration()
        case "hold_time": holdTime = try duration()
        case "recheck_interval": recheckInterval = try duration()
        case "poll_interval": pollInterval = try duration()
        case "pressure_level_quiet_time": pressureLevelQuietTime = try duration()
        case "forecast_horizon": forecastHorizon = try duration()
        case "growth_window": growthWindow = try duration()
        case "trim_interval": trimInterval = try duration()
        case "trim_step_percent": trimStepPercent = try number()
        case "trim_stall_percent": trimStallPercent = try number()
        case "worst_case_growth":
            guard let rate = Self.growthRate(value) else {
                throw PolicyError(.badValue, "\(origin): \(key) must be a rate such as 1G/s or 512M/s, or 0, is \(Self.quoted(value))")
            }
            worstCaseGrowthBytesPerSecond = rate
        case "ancestor_limits":
            switch value {
            case "watch": countsAncestorLimits = true
            case "ignore": countsAncestorLimits = false
            default: throw PolicyError(.badValue, "\(origin): \(key) must be watch or ignore, is \(Self.quoted(value))")
            }
        case "inactive_page_cache":
            switch value {
            case "count": countsInactivePageCache = true
            case "ignore": countsInactivePageCache = false
            default: throw PolicyError(.badValue, "\(origin): \(key) must be count or ignore, is \(Self.quoted(value))")
            }
        default: throw PolicyError(.unknownKey, "\(origin): unknown key \(Self.quoted(key)) (known: \(Self.keys.joined(separator: ", ")))")
        }
    }

    /// Parses a duration as policy files write it: `250ms`, `2s`, `1.5s`, `1m`.
    ///
    /// - Parameter text: the duration, with its unit.
    /// - Returns: the duration, or `nil` for anything else (a negative or absurdly large value included).
    package static func parseDuration(_ text: String) -> Duration? { duration(text) }

    /// Parses a growth rate as policy files write it: a size per second (`1G/s`, `512M/s`,
    /// `1.5GiB/s`; K, M, G and T are powers of 1024), or `0`.
    ///
    /// - Parameter text: the rate.
    /// - Returns: bytes a second, or `nil` for anything else.
    package static func parseGrowthRate(_ text: String) -> UInt64? { growthRate(text) }

    static func growthRate(_ text: String) -> UInt64? {
        if text == "0" { return 0 }
        guard text.hasSuffix("/s") else { return nil }
        return ByteSize.parse(String(text.dropLast(2)))
    }

    /// A duration as policy files write it: `5ms`, `250ms`, `1s`, `1.5s`.
    ///
    /// - Parameter duration: the duration.
    /// - Returns: milliseconds below a second, seconds from one on.
    package static func formatDuration(_ duration: Duration) -> String {
        let milliseconds = Double(duration.components.seconds) * 1e3 + Double(duration.components.attoseconds) / 1e15
        if milliseconds < 1000 { return "\(ByteSize.fixed(milliseconds, decimals: milliseconds.rounded() == milliseconds ? 0 : 1))ms" }
        let seconds = milliseconds / 1000
        return "\(ByteSize.fixed(seconds, decimals: seconds.rounded() == seconds ? 0 : 1))s"
    }

    /// Parses `250ms`, `2s`, `1.5s`, `1m`.
    static func duration(_ text: String) -> Duration? {
        let units: [(String, Double)] = [("ms", 1e-3), ("s", 1), ("m", 60)]
        for (suffix, scale) in units where text.hasSuffix(suffix) {
            guard let number = Double(text.dropLast(suffix.count)), number.isFinite, number >= 0 else { return nil }
            let milliseconds = (number * scale * 1000).rounded()
            // Beyond Int64's range the conversion would trap; no setting needs centuries.
            guard milliseconds < 1e15 else { return nil }
            return .milliseconds(Int64(milliseconds))
        }
        return nil
    }
}

extension StringProtocol {
    func trimmingWhitespace() -> String {
        String(drop { $0.isWhitespace }.reversed().drop { $0.isWhitespace }.reversed())
    }
}
