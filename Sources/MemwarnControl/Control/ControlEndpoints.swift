import MemwarnSystem

#if canImport(Glibc)
import Glibc
#endif

/// This process's control endpoints, one per directory: services that run with the same
/// directory share one socket (one `<pid>.sock` a process), and it closes when the last of
/// them leaves.
enum ControlEndpoints {
    /// A service's place on an endpoint, for ``leave(_:)``.
    struct Membership: Sendable {
        let endpoint: ControlEndpoint
        let id: Int
        /// The endpoint's socket.
        var socketPath: String { endpoint.socketPath }
    }

    private static let running = Locked<[String: ControlEndpoint]>([:])

    /// Removes the sockets of the endpoints still running when the process exits (`exit()` runs
    /// no Swift cleanup: a service or tool that exits without stopping its monitor would leave
    /// a stale `<pid>.sock`). Registered with `atexit` once, by the first endpoint.
    private static let removeSocketsAtExit: Void = {
        atexit {
            let endpoints = ControlEndpoints.running.withLock { Array($0.values) }
            for endpoint in endpoints { endpoint.removeSocketFile() }
        }
    }()

    /// Serves `subject` on the endpoint in `directory`, starting that endpoint if none runs.
    ///
    /// - Throws: `ControlError` when the endpoint cannot start.
    static func join(directory: String, subject: ControlSubject) throws(ControlError) -> Membership {
        let joined = running.withLock { running -> Result<Membership, ControlError> in
            if let endpoint = running[directory] {
                return .success(Membership(endpoint: endpoint, id: endpoint.join(subject)))
            }
            do throws(ControlError) {
                removeSocketsAtExit
                let endpoint = try ControlEndpoint(directory: directory)
                try endpoint.start()
                let id = endpoint.join(subject)
                running[directory] = endpoint
                return .success(Membership(endpoint: endpoint, id: id))
            } catch {
                return .failure(error)
            }
        }
        return try joined.get()
    }

    /// Stops serving a service; the last one to leave stops the endpoint and removes its socket.
    static func leave(_ membership: Membership) async {
        let last = running.withLock { running in
            guard membership.endpoint.leave(membership.id) else { return false }
            running[membership.endpoint.directory] = nil
            return true
        }
        if last { await membership.endpoint.stop() }
    }
}
