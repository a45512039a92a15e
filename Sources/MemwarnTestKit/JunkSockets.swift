import MemwarnSystem

#if canImport(Glibc)
import Glibc
#endif

/// Sockets in a control directory that no memwarn service serves: listeners whose backlog is
/// full (they never accept), and listeners that accept into their backlog and never answer.
/// Held open while this lives, and removed with it: for the agent's tests and benchmark.
public final class JunkSockets {
    private final class Held {
        let descriptor: FileDescriptor
        init(_ descriptor: consuming FileDescriptor) { self.descriptor = descriptor }
    }
    private var held: [Held] = []
    private var paths: [String] = []

    /// Makes `full` listeners whose backlog is full and `silent` ones that never answer, named
    /// `<dir>/<n>.sock` with `n` from 4,000,000 up (no process of this machine has such a pid).
    ///
    /// - Throws: MemwarnSystem's `SystemError` when a socket cannot be made.
    public init(in directory: String, full: Int, silent: Int) throws {
        for index in 0..<(full + silent) {
            // Named as an endpoint: a pid that is not a memwarn service's.
            let path = directory + "/\(4_000_000 + index).sock"
            let listener = try FileDescriptor.unixStreamSocket(nonBlocking: true)
            try listener.bind(to: UnixSocketAddress(path: path))
            try listener.listen(backlog: index < full ? 0 : 64)
            paths.append(path)
            if index < full {
                // One connection that is never accepted fills a backlog of 0.
                let client = try FileDescriptor.unixStreamSocket(nonBlocking: true)
                try client.connect(to: UnixSocketAddress(path: path))
                held.append(Held(client))
            }
            held.append(Held(listener))
        }
    }

    deinit {
        for path in paths { unlink(path) }
    }
}
