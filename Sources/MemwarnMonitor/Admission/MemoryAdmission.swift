import CgroupKit
import MemwarnSystem

/// Admits work by the memory it will take: a handler that knows a request's size before it takes
/// it on (a body's `Content-Length`, an upload, a batch) reserves those bytes, and is refused
/// while the bytes already reserved by work in flight and its own do not fit in what is left below
/// the critical mark.
///
/// Shedding on ``PressureMonitor/isMemoryExhausted`` alone is too late for work that arrives
/// faster than a release can act: exhaustion is found after a release at `critical`, and 32
/// uploads of 6 MB taken on at once are 192 MB in flight under a 128 MiB limit before the first
/// reading sees them. An admission sees them as they are asked for:
///
/// ```swift
/// let admission = MemoryAdmission(monitor: monitor)
/// // per request, before its body is read:
/// guard let reservation = admission.reserve(bytes: declaredLength ?? largestBodyAccepted) else {
///     return shed()                                   // 503 with Retry-After
/// }
/// defer { reservation.release() }                     // once the body is stored or dropped
/// ```
///
/// The headroom is the binding limit's critical mark (``PressurePolicy/criticalRatio``) less
/// usage — the binding limit's usage file read afresh at most every ``freshness`` (one `pread`;
/// a request in between uses the last figure) — less the bytes reserved. The binding limit and
/// its capacity come from the monitor's latest full reading; with no limit, the system's memory
/// (`/proc/meminfo`). While memory is exhausted nothing is admitted. A monitor without a reading
/// (turned off with `MEMWARN_DISABLE`, or it could not arm) admits everything, and counts it. A reserved body counts twice once it is in memory (in usage and in the
/// reservation) until the reservation is released: admission errs on the side of refusing.
///
/// Thread-safe; one lock, held for the arithmetic (and a read of the usage file at most every
/// ``freshness``).
public final class MemoryAdmission: Sendable {
    /// A reservation of memory for admitted work: released by ``release()`` (once the work's
    /// memory is stored where usage counts it, or dropped), or when it is deallocated.
    public final class Reservation: Sendable {
        /// The bytes reserved.
        public let bytes: Int
        private let admission: MemoryAdmission
        private let released = Locked(false)

        init(bytes: Int, admission: MemoryAdmission) {
            self.bytes = bytes
            self.admission = admission
        }

        /// Gives the bytes back to the admission. Calling it again does nothing.
        public func release() {
            let first = released.withLock { released in
                defer { released = true }
                return !released
            }
            if first { admission.give(back: bytes) }
        }

        deinit { release() }
    }

    /// The most one reservation counts (256 TiB): a larger size — `Int.max` for "unknown", say —
    /// counts as this, so that the sum of reservations cannot overflow.
    package static let largestReservation = 1 << 48

    /// How old a usage figure may be before the next reservation reads the usage file again.
    public let freshness: Duration
    private let monitor: PressureMonitor
    private let state = Locked(State())

    private struct State {
        var reserved = 0
        var admitted = 0
        var refused = 0
        /// The usage file read, with the binding limit it was opened for (its cgroup, or `nil`
        /// for the system's memory, and whether the limit is hidden): compared in place on every
        /// reservation, the path made only when the binding changes.
        var file: (binding: String?, hidden: Bool, file: UsageFile)?
        var usage: (bytes: UInt64, at: ContinuousClock.Instant)?
        /// When the usage file last could not be opened or read: not tried again for a second.
        var failedAt: ContinuousClock.Instant?
    }

    /// An admission against `monitor`'s readings and policy.
    ///
    /// - Parameters:
    ///   - monitor: the monitor whose binding limit, policy and exhausted state count.
    ///   - freshness: how old a usage figure may be when a reservation is decided (2 ms by
    ///     default: a burst of requests costs one read of the usage file every 2 ms).
    public init(monitor: PressureMonitor, freshness: Duration = .milliseconds(2)) {
        self.monitor = monitor
        self.freshness = freshness
    }

    /// Reserves `bytes` for work about to be taken on, or refuses.
    ///
    /// - Parameter bytes: what the work will hold at most (a body's declared length; the
    ///   largest body accepted when none is declared). Negative counts as 0, more than
    ///   2^48 bytes as that.
    /// - Returns: the reservation, or `nil` when memory is exhausted or `bytes` do not fit in the
    ///   headroom below the critical mark left by the work in flight: shed the request then.
    public func reserve(bytes: Int) -> Reservation? {
        let bytes = min(max(0, bytes), Self.largestReservation)
        let exhausted = monitor.isMemoryExhausted
        let room = exhausted ? nil : headroom()
        return state.withLock { state -> Reservation? in
            if exhausted {
                state.refused += 1
                return nil
            }
            if let room, room.bytes - state.reserved < bytes {
                state.refused += 1
                return nil
            }
            state.reserved += bytes
            state.admitted += 1
            return Reservation(bytes: bytes, admission: self)
        }
    }

    /// The bytes left below the critical mark now, less those reserved; `nil` when the monitor
    /// has no reading. Negative when usage and reservations are already past the mark.
    public var headroomBytes: Int? {
        guard let room = headroom() else { return nil }
        return room.bytes - state.withLock { $0.reserved }
    }

    /// The bytes reserved by work in flight.
    public var reservedBytes: Int { state.withLock { $0.reserved } }
    /// Reservations made so far.
    public var admittedCount: Int { state.withLock { $0.admitted } }
    /// Reservations refused so far.
    public var refusedCount: Int { state.withLock { $0.refused } }

    fileprivate func give(back bytes: Int) {
        state.withLock { $0.reserved -= bytes }
    }

    /// The critical mark less usage now (before reservations), or `nil` without a reading.
    private func headroom() -> (bytes: Int, usage: UInt64)? {
        guard let snapshot = monitor.latestSnapshot, let capacity = snapshot.binding?.limit.bytes ?? snapshot.capacityBytes else { return nil }
        let mark = Double(LevelMarks(policy: monitor.policy, capacityBytes: capacity).criticalBytes)
        let usage = currentUsage(of: snapshot) ?? snapshot.binding?.usageBytes ?? snapshot.usageBytes
        return (Int(mark) - Int(clamping: usage), usage)
    }

    /// The binding limit's usage, read afresh at most every ``freshness``; `nil` when its file
    /// cannot be read (the reading's own figure is used then).
    private func currentUsage(of snapshot: PressureSnapshot) -> UInt64? {
        let binding = snapshot.cgroup == nil ? nil : snapshot.binding
        let now = ContinuousClock.now
        return state.withLock { state -> UInt64? in
            let opened = state.file.map { $0.binding == binding?.cgroupPath && $0.hidden == (binding?.isHidden ?? false) } ?? false
            if opened, let usage = state.usage, now - usage.at < freshness { return usage.bytes }
            if let failedAt = state.failedAt, now - failedAt < .seconds(1) { return nil }
            do {
                if !opened {
                    let (path, format) = Self.usageFile(of: snapshot)
                    state.file = (binding?.cgroupPath, binding?.isHidden ?? false, try UsageFile(path, format: format, files: monitor.configuration.files))
                }
                let bytes = try state.file!.file.read()
                state.usage = (bytes, now)
                state.failedAt = nil
                return bytes
            } catch {
                state.file = nil
                state.usage = nil
                state.failedAt = now
                return nil
            }
        }
    }

    /// The usage file of the reading's binding limit (the cgroup's own for a hidden one), or
    /// `/proc/meminfo` when no limit applies.
    static func usageFile(of snapshot: PressureSnapshot) -> (path: String, format: UsageFile.Format) {
        guard let binding = snapshot.binding, let own = snapshot.cgroup else { return ("/proc/meminfo", .meminfo) }
        let location = binding.isHidden ? own : CgroupLocation(version: own.version, mountPoint: own.mountPoint, path: binding.cgroupPath)
        return (location.file(own.version == .v1 ? "memory.usage_in_bytes" : "memory.current"), .bytes)
    }
}
