/// What `memwarn run` and `memwarn soak` set as the cgroup's `memory.high` (cgroup v2 only).
///
/// Above `memory.high` the kernel throttles the cgroup's allocations and reclaims instead of
/// killing, and it counts each time in `memory.events` (`high`), which a monitor watches with
/// inotify: growth too fast for sampling is slowed there, and the monitor is woken. By default
/// (``automatic``) it sits halfway between the critical mark and `memory.max` — 95 % of it on the
/// default policy. The monitor measures against the lower of the two limits, so its marks move
/// down with it (76 % and 85.5 % of `memory.max` on the default policy).
package struct MemoryHighSetting: Sendable, Hashable, CustomStringConvertible {
    private enum Base: Sendable, Hashable {
        case automatic
        case none
        case bytes(UInt64)
    }

    private let base: Base

    /// On cgroup v2, halfway between the policy's critical mark and `memory.max`; nothing on v1
    /// (it has no `memory.high`).
    package static let automatic = MemoryHighSetting(base: .automatic)
    /// No `memory.high` (`--memory-high max`).
    package static let none = MemoryHighSetting(base: .none)

    /// A `memory.high` of `bytes` (cgroup v2 only: an error on v1).
    ///
    /// - Parameter bytes: the throttling limit in bytes.
    /// - Returns: the setting.
    package static func bytes(_ bytes: UInt64) -> MemoryHighSetting { MemoryHighSetting(base: .bytes(bytes)) }

    /// The bytes to write to `memory.high`, or `nil` for none.
    ///
    /// - Parameters:
    ///   - memoryMax: the hard limit in bytes.
    ///   - criticalRatio: the policy's critical mark (above 1: usage-based critical is off, and
    ///     ``automatic`` sets nothing).
    ///   - isV2: whether the cgroup is on cgroup v2.
    /// - Returns: the throttling limit, or `nil`.
    package func bytes(memoryMax: UInt64, criticalRatio: Double, isV2: Bool) -> UInt64? {
        switch base {
        case .none: return nil
        case .bytes(let bytes): return bytes
        case .automatic:
            guard isV2, criticalRatio < 1 else { return nil }
            let share = criticalRatio + (1 - criticalRatio) / 2
            return UInt64(Double(memoryMax) * share) / 4096 * 4096
        }
    }

    package var description: String {
        switch base {
        case .automatic: "automatic"
        case .none: "none"
        case .bytes(let bytes): "\(bytes)"
        }
    }
}
