import CLibcgroup
#if canImport(Glibc)
import Glibc
#endif

/// Starts a detached POSIX thread for a blocking loop (the monitor's epoll loop), so it
/// never occupies a thread of Swift's cooperative pool.
enum LoopThread {
    private final class Box {
        let name: String
        let body: () -> Void
        init(_ name: String, _ body: @escaping () -> Void) {
            self.name = String(name.prefix(15))
            self.body = body
        }
    }

    /// Runs `body` on a new thread named `name`.
    static func start(name: String, _ body: @escaping () -> Void) {
        let box = Unmanaged.passRetained(Box(name, body)).toOpaque()
        var thread = pthread_t()
        let status = pthread_create(&thread, nil, { raw in
            let box = Unmanaged<Box>.fromOpaque(raw!).takeRetainedValue()
            _ = memwarn_set_thread_name(box.name)
            box.body()
            return nil
        }, box)
        precondition(status == 0, "pthread_create failed: \(status)")
        pthread_detach(thread)
    }
}
