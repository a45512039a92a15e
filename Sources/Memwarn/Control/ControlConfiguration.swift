/// Whether and where a ``PressureMonitor`` serves its control endpoint, and which
/// coordinator the endpoint's release requests go to.
///
/// While a monitor runs, its process listens on a Unix socket, `<pid>.sock` in
/// ``ControlDirectory``, for `memwarn trigger` and other local tools: one JSON line in, one
/// JSON line out (see ``ControlRequest`` and ``ControlReply``). Only the process's own user
/// and root are served. Monitors of one process that run with the same directory share one
/// endpoint: the one that started first answers `status`, with its coordinator.
///
/// If the endpoint cannot start (the directory is another user's, a symbolic link, not
/// writable…), the monitor logs an error with the reason and runs without it;
/// ``PressureMonitor/controlSocketPath`` is then `nil`.
public struct ControlConfiguration: Sendable {
    /// Whether the monitor serves the endpoint.
    public var isEnabled: Bool
    /// The directory for the socket; `nil` uses ``ControlDirectory/defaultPath``.
    public var directory: String?
    /// The coordinator that `warn` and `terminate-suspended` requests release through.
    public var coordinator: ReleaseCoordinator

    /// A configuration.
    ///
    /// - Parameters:
    ///   - environment: the process environment: `MEMWARN_CONTROL=off` (or `0`) disables the endpoint.
    ///   - directory: the directory for the socket, or `nil` for the default.
    ///   - coordinator: the coordinator release requests go to.
    public init(environment: [String: String] = [:], directory: String? = nil, coordinator: ReleaseCoordinator = .shared) {
        self.isEnabled = Self.isEnabled(environment: environment)
        self.directory = directory
        self.coordinator = coordinator
    }

    /// Whether an environment leaves the endpoint enabled: anything but `MEMWARN_CONTROL=off` or `0`.
    public static func isEnabled(environment: [String: String]) -> Bool {
        guard let value = environment["MEMWARN_CONTROL"] else { return true }
        return !["off", "0"].contains(value.lowercased())
    }
}
