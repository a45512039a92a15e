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
    /// Whether the monitor serves the endpoint. Off unless the application asks for it
    /// (``init(isRequested:environment:directory:coordinator:)``) or the environment says
    /// `MEMWARN_CONTROL=on`; `MEMWARN_CONTROL=off` turns it off even when the application asks.
    public var isEnabled: Bool
    /// The directory for the socket; `nil` uses ``ControlDirectory/defaultPath``.
    public var directory: String?
    /// The coordinator that `warn` and `terminate-suspended` requests release through.
    public var coordinator: ReleaseCoordinator

    /// A configuration.
    ///
    /// The endpoint is opt-in: a library linked into many processes must not open a socket in
    /// each of them unasked. The application asks with `isRequested`; the operator decides
    /// last with `MEMWARN_CONTROL` (`on`/`1` serves the endpoint, `off`/`0` does not), which is
    /// what `memwarn run` and `memwarn soak` set for the commands they start.
    ///
    /// - Parameters:
    ///   - isRequested: whether the application asks for the endpoint.
    ///   - environment: the process environment, for `MEMWARN_CONTROL`.
    ///   - directory: the directory for the socket, or `nil` for the default.
    ///   - coordinator: the coordinator release requests go to.
    public init(isRequested: Bool = false, environment: [String: String] = [:], directory: String? = nil,
                coordinator: ReleaseCoordinator = .shared) {
        self.isEnabled = Self.isEnabled(requested: isRequested, environment: environment)
        self.directory = directory
        self.coordinator = coordinator
    }

    /// The environment variable that serves (`on`, `1`, `yes`, `true`) or withholds (`off`, `0`,
    /// `no`, `false`) the endpoint, whatever the application asked.
    public static let environmentVariable = "MEMWARN_CONTROL"

    /// Whether the endpoint is served: as `MEMWARN_CONTROL` says when it is set to a known
    /// value, else as the application asked.
    ///
    /// - Parameters:
    ///   - requested: whether the application asks for the endpoint.
    ///   - environment: the process environment.
    /// - Returns: whether to serve the endpoint.
    public static func isEnabled(requested: Bool, environment: [String: String]) -> Bool {
        switch environment[environmentVariable]?.lowercased() {
        case "on", "1", "yes", "true": true
        case "off", "0", "no", "false": false
        default: requested
        }
    }
}
