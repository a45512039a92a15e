import CLibcgroup
#if canImport(Glibc)
import Glibc
#endif

/// Starts a detached POSIX thread for a blocking loop (the monitor's epoll loop), so it
/// never occupies a thread of Swift's cooperative pool.
enum LoopThread {
    private final class Box {
        let body: () -> Void
        init(_ body: @escaping () -> Void) { self.body = body }
    }

    /// Runs `body` on a new thread named `name`.
    static func start(name: String, _ body: @escaping () -> Void) {
        let box = Unmanaged.passRetained(Box(body)).toOpaque()
        var thread = pthread_t()
        let status = pthread_create(&thread, nil, { raw in
            let box = Unmanaged<Box>.fromOpaque(raw!).takeRetainedValue()
            box.body()
            return nil
        }, box)
        precondition(status == 0, "pthread_create failed: \(status)")
        pthread_setname_np(thread, String(name.prefix(15)))
        pthread_detach(thread)
    }
}
