/// Pressure stall information (PSI) for memory: how much of the time tasks were stalled
/// waiting for memory.
///
/// Read from `/proc/pressure/memory` (the whole system) or a cgroup2 group's
/// `memory.pressure`. See the kernel's `Documentation/accounting/psi.rst`.
public struct PressureStall: Sendable, Hashable, Codable {
    /// One line of a PSI file.
    public struct Line: Sendable, Hashable, Codable {
        /// Share of time stalled, in percent, over the last 10 seconds.
        public var avg10: Double
        /// Share of time stalled, in percent, over the last 60 seconds.
        public var avg60: Double
        /// Share of time stalled, in percent, over the last 300 seconds.
        public var avg300: Double
        /// Total stall time since boot, in microseconds.
        public var total: UInt64

        /// Creates a line.
        ///
        /// - Parameters:
        ///   - avg10: percent of time stalled over the last 10 seconds.
        ///   - avg60: percent of time stalled over the last 60 seconds.
        ///   - avg300: percent of time stalled over the last 300 seconds.
        ///   - total: total stall time since boot, in microseconds.
        package init(avg10: Double, avg60: Double, avg300: Double, total: UInt64) {
            self.avg10 = avg10
            self.avg60 = avg60
            self.avg300 = avg300
            self.total = total
        }
    }

    /// Some tasks were stalled.
    public var some: Line
    /// All non-idle tasks were stalled at once (absent on very old kernels' system file).
    public var full: Line?

    /// Creates a reading.
    ///
    /// - Parameters:
    ///   - some: the `some` line.
    ///   - full: the `full` line, when the file has one.
    package init(some: Line, full: Line?) {
        self.some = some
        self.full = full
    }

    /// Parses a PSI file: `some avg10=… avg60=… avg300=… total=…`, then optionally `full …`.
    ///
    /// - Parameters:
    ///   - text: the content of a PSI file, such as `memory.pressure`.
    ///   - path: the file's path, for error messages.
    /// - Returns: the reading.
    /// - Throws: `CgroupError` `.malformed` when the `some` line is missing, a field is
    ///   missing or not a number, or a percentage is outside 0…100.
    package static func parse(_ text: String, path: String) throws(CgroupError) -> PressureStall {
        var some: Line?
        var full: Line?
        for line in text.split(separator: "\n") where !line.allSatisfy(\.isWhitespace) {
            let fields = line.split(separator: " ")
            let kind = fields[0]
            guard kind == "some" || kind == "full" else {
                throw CgroupError(.malformed, "unexpected line \"\(CgroupValues.preview(line))\"", path: path)
            }
            var values: [Substring: Substring] = [:]
            for field in fields.dropFirst() {
                let pair = field.split(separator: "=", maxSplits: 1)
                guard pair.count == 2 else {
                    throw CgroupError(.malformed, "field \"\(CgroupValues.preview(field))\" is not name=value", path: path)
                }
                values[pair[0]] = pair[1]
            }
            func percent(_ name: Substring) throws(CgroupError) -> Double {
                guard let text = values[name], let value = Double(text), value >= 0, value <= 100 else {
                    throw CgroupError(.malformed, "\(kind) line: \(name) missing or not a percentage", path: path)
                }
                return value
            }
            guard let totalText = values["total"], let total = UInt64(totalText) else {
                throw CgroupError(.malformed, "\(kind) line: total missing or not a number", path: path)
            }
            let parsed = Line(avg10: try percent("avg10"), avg60: try percent("avg60"), avg300: try percent("avg300"), total: total)
            if kind == "some" { some = parsed } else { full = parsed }
        }
        guard let some else { throw CgroupError(.malformed, "no \"some\" line", path: path) }
        return PressureStall(some: some, full: full)
    }
}
