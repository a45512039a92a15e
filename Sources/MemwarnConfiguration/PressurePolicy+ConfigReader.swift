public import Configuration
public import MemwarnMonitor

/// The policy read from apple/swift-configuration.
extension PressurePolicy {
    /// Reads the policy from apple/swift-configuration: the defaults, then every key the
    /// reader's providers have, under the names and with the values of `Config/memwarn.conf`
    /// (`warning_ratio = 0.8`, `growth_window = 10s`, `worst_case_growth = 1G/s`,
    /// `ancestor_limits = watch`), validated as `PressurePolicy.load(file:environment:)` validates them.
    ///
    /// Scope the reader to memwarn's prefix, as a library's settings are scoped: with
    /// `config.scoped(to: "memwarn")`, a JSON or YAML file's `memwarn.warning_ratio` is read,
    /// and from `EnvironmentVariablesProvider` the variable `MEMWARN_WARNING_RATIO` — the very
    /// variables memwarn reads on its own. A number may be written as a number (`0.8`) or as
    /// text (`"0.8"`); a duration or a rate only as text with its unit (`"250ms"`, `"1G/s"`).
    ///
    /// - Parameter config: the reader, scoped to memwarn's keys.
    /// - Throws: ``/MemwarnMonitor/PolicyError`` naming the key of a bad value
    ///   (``/MemwarnMonitor/PolicyError/Code/badValue``) or an inconsistent result
    ///   (``/MemwarnMonitor/PolicyError/Code/inconsistent``), as a policy file's errors do.
    public init(config: ConfigReader) throws(PolicyError) {
        try self.init(config: config.snapshot())
    }

    /// Reads the policy from one snapshot of a reader (what
    /// `PressureMonitor.followPolicy(from:refused:)` reads at each change).
    ///
    /// - Parameter snapshot: the snapshot, scoped to memwarn's keys.
    /// - Throws: ``/MemwarnMonitor/PolicyError`` as `init(config:)` reading a whole reader.
    public init(config snapshot: ConfigSnapshotReader) throws(PolicyError) {
        self.init()
        for key in Self.keys {
            guard let value = Self.text(of: key, in: snapshot) else { continue }
            try set(key, to: value, origin: "configuration key \(key)")
        }
        do {
            try validate()
        } catch {
            throw PolicyError(error.code, "policy from the configuration: \(error.message)")
        }
    }

    /// A key's value as a policy file would write it: text as it is, a number (JSON's and YAML's
    /// own) as its digits.
    static func text(of key: String, in snapshot: ConfigSnapshotReader) -> String? {
        let configKey = ConfigKey(key)
        if let text = snapshot.string(forKey: configKey) { return text }
        if let number = snapshot.int(forKey: configKey) { return String(number) }
        if let number = snapshot.double(forKey: configKey) { return String(number) }
        return nil
    }
}
