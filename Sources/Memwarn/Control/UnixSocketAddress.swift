#if canImport(Glibc)
import Glibc
#endif

/// A filesystem Unix socket address (`sockaddr_un`), for `bind` and `connect`.
struct UnixSocketAddress {
    private var storage = sockaddr_un()

    /// - Throws: ``ControlError`` when the path does not fit `sun_path` (107 bytes).
    init(path: String) throws(ControlError) {
        let bytes = Array(path.utf8)
        let capacity = MemoryLayout.size(ofValue: storage.sun_path)
        guard !bytes.isEmpty, bytes.count < capacity else {
            throw ControlError("the socket path \(path) is longer than \(capacity - 1) bytes")
        }
        storage.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &storage.sun_path) { $0.copyBytes(from: bytes) }
    }

    /// Calls `body` with the address as `bind` and `connect` take it.
    func withSocketAddress<T>(_ body: (UnsafePointer<sockaddr>, socklen_t) -> T) -> T {
        withUnsafePointer(to: storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
    }
}
