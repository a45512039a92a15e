struct BenchmarkError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// Order statistics of a set of latencies, in nanoseconds.
struct LatencySummary {
    var samples: [Int64]
    private var sorted: [Int64]

    init(_ samples: [Int64]) {
        self.samples = samples
        sorted = samples.sorted()
    }

    var count: Int { sorted.count }
    var min: Int64 { sorted.first ?? 0 }
    var max: Int64 { sorted.last ?? 0 }
    var mean: Double { sorted.isEmpty ? 0 : Double(sorted.reduce(0, +)) / Double(sorted.count) }

    /// The nearest-rank percentile: the smallest sample with at least `percent`% of samples at or below it.
    func percentile(_ percent: Double) -> Int64 {
        guard !sorted.isEmpty else { return 0 }
        let rank = Int((percent / 100 * Double(sorted.count)).rounded(.up))
        return sorted[Swift.max(0, Swift.min(sorted.count - 1, rank - 1))]
    }
}

/// `value` with `digits` decimals (no Foundation).
func fixed(_ value: Double, _ digits: Int = 3) -> String {
    guard value.isFinite else { return "\(value)" }
    var scale = 1.0
    for _ in 0..<digits { scale *= 10 }
    let scaled = (abs(value) * scale).rounded()
    let whole = UInt64(scaled / scale)
    var fraction = String(UInt64(scaled - Double(whole) * scale))
    while fraction.count < digits { fraction = "0" + fraction }
    let sign = value < 0 && scaled > 0 ? "-" : ""
    return digits == 0 ? "\(sign)\(whole)" : "\(sign)\(whole).\(fraction)"
}

func milliseconds(_ nanoseconds: Int64) -> Double { Double(nanoseconds) / 1_000_000 }
func milliseconds(_ nanoseconds: Double) -> Double { nanoseconds / 1_000_000 }

/// A table with a header row, columns padded to their widest cell (first column left-aligned).
func table(_ rows: [[String]]) -> String {
    guard let header = rows.first else { return "" }
    var widths = header.map(\.count)
    for row in rows { for (index, cell) in row.enumerated() { widths[index] = Swift.max(widths[index], cell.count) } }
    func line(_ row: [String]) -> String {
        row.enumerated().map { index, cell in
            let pad = String(repeating: " ", count: widths[index] - cell.count)
            return index == 0 ? cell + pad : pad + cell
        }.joined(separator: "  ")
    }
    let rule = widths.map { String(repeating: "-", count: $0) }.joined(separator: "  ")
    return ([line(header), rule] + rows.dropFirst().map(line)).joined(separator: "\n")
}

/// Just enough JSON to print one object (no Foundation).
indirect enum JSON {
    case string(String)
    case int(Int64)
    case double(Double, digits: Int)
    case bool(Bool)
    case array([JSON])
    case object([(String, JSON)])
    /// JSON text made elsewhere (a child process's object), inserted as it is.
    case raw(String)

    static func number(_ value: Int) -> JSON { .int(Int64(value)) }
    static func number(_ value: UInt64) -> JSON { .int(Int64(clamping: value)) }

    var text: String {
        switch self {
        case .string(let value): return JSON.quote(value)
        case .int(let value): return String(value)
        case .double(let value, let digits): return value.isFinite ? fixed(value, digits) : "null"
        case .bool(let value): return value ? "true" : "false"
        case .array(let values): return "[" + values.map(\.text).joined(separator: ",") + "]"
        case .object(let members): return "{" + members.map { JSON.quote($0.0) + ":" + $0.1.text }.joined(separator: ",") + "}"
        case .raw(let text): return text
        }
    }

    private static func quote(_ string: String) -> String {
        var out = "\""
        for scalar in string.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\t": out += "\\t"
            case "\r": out += "\\r"
            default:
                if scalar.value < 0x20 {
                    let hex = String(scalar.value, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out + "\""
    }
}
