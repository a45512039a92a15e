import CgroupKit
import MemwarnRelease
import MemwarnSystem

#if canImport(Glibc)
import Glibc
#endif

/// Which PSI line a trigger or sample watches.
enum StallKind: String, Sendable {
    case some, full
}

/// A PSI trigger: a PSI file opened `O_RDWR | O_NONBLOCK` with `"<some|full> <threshold µs>
/// <window µs>"` written to it (with its terminating NUL: the kernel overwrites the last
/// byte written with NUL). The descriptor then raises `EPOLLPRI` at most once per window
/// while stalls exceed the threshold, and `EPOLLERR` when the source goes away.
final class PressureTrigger: PressureSource {
    let descriptor: FileDescriptor
    let kind: StallKind
    let threshold: Duration
    let window: Duration
    let path: String
    /// The level a firing hints at.
    var level = MemoryPressureLevel.warning

    /// The window the kernel will accept: without `CAP_SYS_RESOURCE`, kernels from 6.4 take
    /// only multiples of 2 s, so an unprivileged window is rounded up to one.
    static func acceptedWindow(_ window: Duration, privileged: Bool) -> Duration {
        if privileged { return window }
        let twoSeconds = Duration.seconds(2)
        let multiples = (window / twoSeconds).rounded(.up)
        return twoSeconds * max(1, multiples)
    }

    /// Registers a trigger.
    ///
    /// - Throws: `CgroupError` with the kernel's `errno`: `EPERM` on kernels 5.13–6.3 for
    ///   unprivileged triggers, `EINVAL` for a threshold or window the kernel rejects,
    ///   `ENOENT` when the file does not exist, `EOPNOTSUPP`/`ENODEV` without PSI.
    init(path: String, kind: StallKind, threshold: Duration, window: Duration, files: KernelFiles = .host) throws(CgroupError) {
        self.path = path
        self.kind = kind
        self.threshold = threshold
        self.window = window
        let realPath = files.path(path)
        do {
            descriptor = try FileDescriptor.open(realPath, O_RDWR | O_NONBLOCK)
        } catch {
            throw KernelFiles.openError(error.errno, realPath, writing: true)
        }
        let request = "\(kind.rawValue) \(threshold.microseconds) \(window.microseconds)"
        do {
            try descriptor.writeWhole(Array(request.utf8) + [0])
        } catch {
            throw CgroupError(.unwritable, "PSI trigger \"\(request)\" refused: \(error.reason)", path: realPath, errno: error.errno)
        }
    }

    func register(on loop: EventLoop, _ fired: @escaping (EpollEvents) -> Void) throws(SystemError) -> EventLoop.Registration? {
        try loop.watch(descriptor, for: [.priority, .error], fired)
    }

    var description: String { "psi-trigger \(kind.rawValue) \(threshold.microseconds)us/\(window.microseconds)us on \(path)" }

    func drain(_ fired: EpollEvents) -> PressureSourceReport {
        if fired.contains(.error) { return .gone(reason: "PSI trigger source went away (\(path))") }
        return .wake(WakeHint(atLeast: level), .psiTrigger)
    }
}

/// The documented fallback where a PSI trigger cannot be registered: read the PSI file's
/// `total` every poll interval and compute the share of time stalled since the last read.
struct PressureSampler: Sendable {
    let path: String
    let kind: StallKind
    /// The share of time stalled, in percent, that counts as firing.
    let percent: Double
    /// Why the trigger could not be used.
    let reason: CgroupError
    private var last: (total: UInt64, at: ContinuousClock.Instant)?

    init(path: String, kind: StallKind, percent: Double, reason: CgroupError) {
        self.path = path
        self.kind = kind
        self.percent = percent
        self.reason = reason
    }

    /// Takes a reading; returns the stall percentage since the previous reading (`nil` on the first).
    mutating func sample(_ stall: PressureStall, at now: ContinuousClock.Instant) -> Double? {
        guard let line = kind == .some ? stall.some : stall.full else { return nil }
        defer { last = (line.total, now) }
        guard let last else { return nil }
        let elapsed = (now - last.at).microseconds
        guard elapsed > 0, line.total >= last.total else { return nil }
        return Double(line.total - last.total) / Double(elapsed) * 100
    }
}

/// A PSI watch: a kernel trigger when the kernel takes one, else the sampling fallback.
enum PressureWatch {
    case trigger(PressureTrigger)
    case sampling(PressureSampler)

    /// The errnos after which memwarn samples instead (documented fallback). `EROFS`: the cgroup
    /// file system is mounted read-only, as OCI runtimes mount it in a container by default.
    static let fallbackErrors: Set<Int32> = [EPERM, EACCES, EINVAL, ENOENT, EOPNOTSUPP, ENODEV, EROFS]

    /// Registers a trigger for `percent` of `window` on `path`, or falls back to sampling.
    ///
    /// - Throws: `CgroupError` for failures other than the fallback errnos.
    static func make(
        path: String, kind: StallKind, percent: Double, window: Duration, privileged: Bool, files: KernelFiles = .host,
        threshold explicitThreshold: Duration? = nil
    ) throws(CgroupError) -> PressureWatch {
        let accepted = PressureTrigger.acceptedWindow(window, privileged: privileged)
        let threshold = explicitThreshold ?? accepted * (percent / 100)
        do {
            return .trigger(try PressureTrigger(path: path, kind: kind, threshold: threshold, window: accepted, files: files))
        } catch {
            guard let code = error.errno, fallbackErrors.contains(code) else { throw error }
            return .sampling(PressureSampler(path: path, kind: kind, percent: percent, reason: error))
        }
    }
}
