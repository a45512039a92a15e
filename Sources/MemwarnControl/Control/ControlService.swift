import Foundation
public import Logging
public import MemwarnMonitor
public import MemwarnRelease
import MemwarnSystem
public import ServiceLifecycle

/// The control endpoint that `memwarn trigger` talks to, as a service: add it to the
/// `ServiceGroup` beside the monitor to let local tools ask the process to release memory.
///
/// ```swift
/// let control = ControlService(monitor: monitor, logger: logger)
/// let group = ServiceGroup(configuration: .init(services: [monitor, control, myService], logger: logger))
/// ```
///
/// While it runs, the process listens on a Unix socket, `<pid>.sock` in its user's control
/// directory — `$XDG_RUNTIME_DIR/memwarn`, else `/run/user/<euid>/memwarn`, else for root
/// `/run/memwarn`, else `/tmp/memwarn-<euid>` (made 0700; one that is a symbolic link, owned by
/// another user or writable by others is refused) — one JSON line in, one JSON line out
/// (`memwarn status`, `trigger` and `agent` speak it). `status`
/// answers with the monitor's latest reading and the coordinator's consumers; `warn` and
/// `terminate-suspended` release through the coordinator, on the endpoint's own thread. Only
/// the process's own user and root are served. Services of one process with the same directory
/// share one socket: the one that started first answers.
///
/// It is opt-in, and adding it is the application's choice: a library is linked into processes
/// whose authors never asked for a socket, and every socket is a surface to secure and a file
/// to clean up. The operator can still withhold it: `MEMWARN_CONTROL=off` (or `0`, `no`,
/// `false`) in the environment keeps it from serving. If the endpoint cannot start (the
/// directory is another user's, a symbolic link, not writable…) the service logs an error with
/// the reason and waits for shutdown without it: the process runs on, ``started()`` returns `nil`.
/// A directory another user made first is named with its owner and what to do; one the endpoint
/// made in a folder where other users may make names (a pod's directory on a node whose
/// `/run/memwarn/pods` is 1777, say; `/tmp/memwarn-<uid>` aside, which has its own answer) is
/// served, with a warning that it could have been taken. It ends on graceful shutdown or
/// cancellation, closing every connection and removing the socket.
public final class ControlService: Service, Sendable {
    /// The environment variable that withholds the endpoint (`off`, `0`, `no`, `false`).
    package static let environmentVariable = "MEMWARN_CONTROL"

    private let subject: ControlSubject
    private let directory: String?
    private let isWithheld: Bool
    private let logger: Logger
    private let serving = Locked<(decided: Bool, socketPath: String?, waiters: [CheckedContinuation<String?, Never>])>((false, nil, []))

    /// A control service for `monitor`'s process.
    ///
    /// - Parameters:
    ///   - monitor: the monitor whose latest reading `status` reports.
    ///   - coordinator: the coordinator that `warn` and `terminate-suspended` requests release through.
    ///   - directory: the directory for the socket; `nil` uses the user's control directory (above).
    ///   - environment: the environment read for `MEMWARN_CONTROL`; `nil` reads this process's.
    ///   - logger: the caller's logger.
    public init(
        monitor: PressureMonitor, coordinator: ReleaseCoordinator = .shared, directory: String? = nil,
        environment: [String: String]? = nil, logger: Logger
    ) {
        subject = ControlSubject(
            latestEvent: { [weak monitor] in monitor?.latestEvent }, coordinator: coordinator,
            monitor: { [weak monitor] in monitor })
        self.directory = directory
        self.logger = logger
        isWithheld = Self.withholds(environment: environment ?? ProcessInfo.processInfo.environment)
    }

    /// Whether an environment withholds the endpoint: `MEMWARN_CONTROL` set to `off`, `0`, `no`
    /// or `false` (in any case).
    ///
    /// - Parameter environment: the process environment.
    /// - Returns: whether the endpoint is withheld.
    package static func withholds(environment: [String: String]) -> Bool {
        ["off", "0", "no", "false"].contains(environment[environmentVariable]?.lowercased() ?? "")
    }

    /// The socket while the service serves it; `nil` before, after, when withheld, or when the
    /// endpoint could not start.
    package var socketPath: String? { serving.withLock { $0.socketPath } }

    /// Waits until the running service has started serving (or found it cannot, or is
    /// withheld), and returns the socket's path.
    ///
    /// - Returns: the socket, or `nil` when the service does not serve one.
    public func started() async -> String? {
        await withCheckedContinuation { continuation in
            let decided = serving.withLock { serving -> String?? in
                if serving.decided { return .some(serving.socketPath) }
                serving.waiters.append(continuation)
                return nil
            }
            if let decided { continuation.resume(returning: decided) }
        }
    }

    private func decide(_ socketPath: String?) {
        let waiters = serving.withLock { serving in
            serving.decided = true
            serving.socketPath = socketPath
            defer { serving.waiters = [] }
            return serving.waiters
        }
        for waiter in waiters { waiter.resume(returning: socketPath) }
    }

    /// Serves the endpoint until graceful shutdown or cancellation.
    public func run() async {
        if isWithheld {
            logger.notice("control endpoint withheld by \(Self.environmentVariable)")
            decide(nil)
            try? await gracefulShutdown()  // returns on shutdown, throws on cancellation: both end the wait
            return
        }
        var directory = self.directory ?? ControlDirectory.defaultPath
        let membership: ControlEndpoints.Membership
        do {
            if self.directory == nil {
                let (path, note) = try ControlDirectory.endpointPath()
                directory = path
                if let note {
                    logger.warning(
                        "control endpoint: the default directory was taken by another user; serving in one of this user's own",
                        metadata: ["taken": "\(note)", "directory": "\(path)"])
                }
            }
            membership = try ControlEndpoints.join(directory: directory, subject: subject)
        } catch {
            logger.error(
                "control endpoint not started; the process runs without it",
                metadata: [
                    "directory": "\(directory)", "reason": "\(error)",
                ])
            decide(nil)
            try? await gracefulShutdown()  // returns on shutdown, throws on cancellation: both end the wait
            return
        }
        decide(membership.socketPath)
        logger.debug("control endpoint listening", metadata: ["socket": "\(membership.socketPath)"])
        if let exposure = ControlDirectory.exposureWarning(for: directory) {
            logger.warning("control endpoint: its directory could have been taken by another user first", metadata: ["reason": "\(exposure)"])
        }
        try? await gracefulShutdown()  // returns on shutdown, throws on cancellation: both end the wait
        serving.withLock { $0.socketPath = nil }
        await ControlEndpoints.leave(membership)
    }

}
