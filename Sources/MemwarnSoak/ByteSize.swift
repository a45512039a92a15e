import Foundation

/// A size given on a command line: bytes, or with a binary unit — `64M`, `1.5G`, `512KiB`,
/// `256m` (K, M, G and T are powers of 1024, as in systemd and cgroup tools).
public enum ByteSize {
    /// The bytes `text` names, or `nil` when it is not a size.
    public static func parse(_ text: String) -> UInt64? {
        let trimmed = text.trimmingPrefix(while: \.isWhitespace)
        let digits = trimmed.prefix { $0.isNumber || $0 == "." }
        var unit = trimmed.dropFirst(digits.count).lowercased()
        if unit.hasSuffix("ib") { unit.removeLast(2) } else if unit.hasSuffix("b") && unit.count == 2 { unit.removeLast() }
        let shifts: [String: Double] = ["": 1, "b": 1, "k": 1_024, "m": 1_048_576, "g": 1_073_741_824, "t": 1_099_511_627_776]
        guard !digits.isEmpty, let number = Double(digits), number.isFinite, let scale = shifts[unit] else { return nil }
        let bytes = (number * scale).rounded()
        guard bytes >= 1, bytes < 1.8e19 else { return nil }
        return UInt64(bytes)
    }

    /// `268435456` as `256.0 MiB`; from 1 GiB on, `1.50 GiB`.
    public static func describe(_ bytes: UInt64) -> String {
        let mebibytes = Double(bytes) / 1_048_576
        return mebibytes >= 1_024 ? String(format: "%.2f GiB", mebibytes / 1_024) : String(format: "%.1f MiB", mebibytes)
    }
}
