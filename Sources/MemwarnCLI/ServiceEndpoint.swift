import Foundation
import MemwarnControl
import MemwarnSystem

#if canImport(Glibc)
import Glibc
#endif

/// A process's control endpoint, as `memwarn trigger --pid` and `memwarn status --pid` find and
/// ask it: `<pid>.sock` in this user's control directories.
enum ServiceEndpoint {
    /// The socket of `pid`'s endpoint: the first of `directories` that holds one.
    ///
    /// - Throws: `ControlError` `.noEndpoint` when the process does not exist or has none, saying
    ///   where it was looked for.
    static func socket(of pid: Int32, in directories: [String]) throws(ControlError) -> String {
        guard Signals.processExists(pid) else { throw ControlError(.noEndpoint, "no process with pid \(pid)") }
        guard let path = directories.map({ ControlDirectory.socketPath(for: pid, in: $0) }).first(where: { FileManager.default.fileExists(atPath: $0) }) else {
            throw ControlError(
                .noEndpoint,
                "process \(pid) has no control endpoint in \(directories.joined(separator: ", ")) "
                    + "(it runs no memwarn ControlService, has MEMWARN_CONTROL=off, or belongs to another user)")
        }
        return path
    }

    /// Asks `pid`'s endpoint for its status, in the directories a client searches (each checked
    /// as `trigger` checks them). Believed only from `pid` itself (`SO_PEERCRED`: not a process
    /// that took its socket over) running as this user or root.
    ///
    /// - Parameter timeout: the bound on the exchange.
    /// - Throws: `ControlError` when there is no endpoint, a directory or the endpoint is not
    ///   trusted, the exchange fails, or the reply is not a status.
    static func status(of pid: Int32, timeout: Duration = .seconds(2)) throws(ControlError) -> ControlStatus {
        let directories = ControlDirectory.searchPaths
        for directory in directories { try ControlDirectory.check(directory) }
        let path = try socket(of: pid, in: directories)
        let (line, _) = try ControlClient.exchange(ControlRequest.status.line, with: path, timeout: timeout) { (peer) throws(ControlError) in
            guard peer.uid == geteuid() || peer.uid == 0 else {
                throw ControlError(.untrusted, "the endpoint on \(path) runs as uid \(peer.uid), neither this user (uid \(geteuid())) nor root; not trusted")
            }
            guard peer.pid == pid else { throw ControlError(.endpointReplaced, "process \(peer.pid), not \(pid), listens on \(path)") }
        }
        guard case .status(let status) = try ControlReply(line: Array(line.utf8)) else {
            throw ControlError(.unexpectedReply, "process \(pid)'s endpoint answered status with something else")
        }
        return status
    }
}
