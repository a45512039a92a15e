/// A size given on a command line: bytes, or with a binary unit — `64M`, `1.5G`, `512KiB`,
/// `256m`, `750Mi` (K, M, G and T are powers of 1024, as in systemd and cgroup tools; `Ki`, `Mi`,
/// `Gi` and `Ti` as Kubernetes writes them in a manifest. A bare `M` is a mebibyte here, as in
/// systemd, not Kubernetes' 10⁶ bytes).
package enum ByteSize {
    /// The bytes `text` names, or `nil` when it is not a size (`0` is not one: see
    /// ``parse(_:allowingZero:)``).
    package static func parse(_ text: String) -> UInt64? {
        parse(text, allowingZero: false)
    }

    /// The bytes `text` names, or `nil` when it is not a size.
    ///
    /// - Parameter allowingZero: whether `0` (in any unit) is a size: a byte count such as
    ///   `memwarn trigger --target-bytes 0` or `memwarn-hog --allocate 0`, not a limit.
    package static func parse(_ text: String, allowingZero: Bool) -> UInt64? {
        let trimmed = text.trimmingPrefix(while: \.isWhitespace)
        let digits = trimmed.prefix { $0.isNumber || $0 == "." }
        let unit = trimmed.dropFirst(digits.count).lowercased()
        guard !digits.isEmpty, let number = Double(digits), number.isFinite, let scale = units[unit] else { return nil }
        let bytes = (number * scale).rounded()
        guard bytes >= 1 || (allowingZero && number == 0), bytes < 1.8e19 else { return nil }
        return UInt64(bytes)
    }

    /// The units, each alone, with `b`, with `ib` or with `i` (`64`, `64b`, `64k`, `64kb`, `64KiB`,
    /// `64Ki`): nothing else (`64ib`, `64i` and `64bb` are not sizes).
    private static let units: [String: Double] = {
        var units: [String: Double] = ["": 1, "b": 1]
        for (letter, scale) in [("k", 1_024.0), ("m", 1_048_576), ("g", 1_073_741_824), ("t", 1_099_511_627_776)] {
            for suffix in ["", "b", "ib", "i"] { units[letter + suffix] = scale }
        }
        return units
    }()

    /// The smallest memory limit `memwarn run` and `memwarn soak` accept: 1 MiB. The kernel takes
    /// any number of pages, but no command can even be started under less (the OOM killer
    /// ends it before its first instruction).
    package static let smallestLimit: UInt64 = 1 << 20

    /// `268435456` as `256.0 MiB`; from 1 GiB on, `1.50 GiB`.
    package static func describe(_ bytes: UInt64) -> String {
        let mebibytes = Double(bytes) / 1_048_576
        return mebibytes >= 1_024 ? "\(fixed(mebibytes / 1_024, decimals: 2)) GiB" : "\(fixed(mebibytes, decimals: 1)) MiB"
    }

    /// `value` rounded to `decimals` places, as `%.<decimals>f` prints it.
    package static func fixed(_ value: Double, decimals: Int) -> String {
        var scale: UInt64 = 1
        for _ in 0..<decimals { scale *= 10 }
        let scaled = UInt64((value * Double(scale)).rounded())
        let fraction = String(scaled % scale)
        return "\(scaled / scale)" + (decimals > 0 ? "." + String(repeating: "0", count: decimals - fraction.count) + fraction : "")
    }

    /// `12.0 MiB`, for a count of bytes another process gave (a service's status or report, the
    /// demo's lines): one below 0 reads as 0, never a trap.
    ///
    /// - Parameter bytes: the count as it was given.
    /// - Returns: the size in words.
    package static func describe(reported bytes: Int) -> String { describe(UInt64(max(0, bytes))) }
}
