import CLinuxCalls

#if canImport(Glibc)
import Glibc
#endif

/// A detached POSIX thread for blocking work (an epoll loop, a child's waiter, a pipe's
/// reader), so that it never occupies a thread of Swift's cooperative pool.
@usableFromInline
package enum SystemThread {
    private final class Start {
        let name: String
        let body: () -> Void
        init(_ name: String, _ body: @escaping () -> Void) {
            self.name = String(name.utf8.prefix(15)) ?? "memwarn"
            self.body = body
        }
    }

    /// Runs `body` on a new thread named `name` (at most 15 bytes are kept, as the kernel does).
    ///
    /// - Throws: ``SystemError`` from `pthread_create` (`EAGAIN`: the process or system is out
    ///   of threads).
    package static func start(name: String, _ body: @escaping () -> Void) throws(SystemError) {
        let start = Unmanaged.passRetained(Start(name, body)).toOpaque()
        var thread = pthread_t()
        let status = pthread_create(
            &thread, nil,
            { raw in
                let start = Unmanaged<Start>.fromOpaque(raw!).takeRetainedValue()
                _ = memwarn_set_thread_name(start.name)
                start.body()
                return nil
            }, start)
        guard status == 0 else {
            Unmanaged<Start>.fromOpaque(start).release()
            throw SystemError("pthread_create", errno: status)
        }
        pthread_detach(thread)
    }
}
