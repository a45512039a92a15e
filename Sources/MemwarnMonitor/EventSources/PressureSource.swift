import CgroupKit
import MemwarnRelease
import MemwarnSystem

/// One kernel signal the monitor listens to: a descriptor the kernel makes readable, or a file
/// read every so often. The monitor's engine registers it on its loop, drains it when it fires,
/// and tears it down; the source says what a firing means.
///
/// Sources live on the monitor's loop thread from registration to tear-down.
protocol PressureSource: AnyObject {
    /// One line of `watchedSources`, such as `oom-control` or
    /// `inotify /sys/fs/cgroup/app/memory.events`.
    var description: String { get }
    /// How often a source without a descriptor is drained; `nil` for a descriptor source.
    var period: Duration? { get }
    /// Watches the source's descriptor on `loop`, calling `fired` with the events that fired.
    ///
    /// - Returns: the registration, or `nil` for a periodic source (nothing to watch).
    /// - Throws: ``SystemError`` from `epoll_ctl`.
    func register(on loop: EventLoop, _ fired: @escaping (EpollEvents) -> Void) throws(SystemError) -> EventLoop.Registration?
    /// Takes what fired and says what it means. Called on the loop thread when the descriptor is
    /// ready (with the events that fired), at every period of a periodic source (with none),
    /// and again after a ``PressureSourceReport/retry(_:)``.
    func drain(_ fired: EpollEvents) -> PressureSourceReport
    /// Closes what it holds. Called on the loop thread once the engine has stopped watching it.
    func tearDown()
}

extension PressureSource {
    var period: Duration? { nil }
    func register(on loop: EventLoop, _ fired: @escaping (EpollEvents) -> Void) throws(SystemError) -> EventLoop.Registration? { nil }
    func tearDown() {}
}

/// What a source's drain found — and what a read of the usage sampler found
/// (``UsageSampling/sample(at:)``): the sampler is no ``PressureSource``, but reports in the same
/// terms, so the engine acts on both alike. The sampler's read never says ``gone(reason:)`` and
/// never asks for a follow-up other than the default.
enum PressureSourceReport {
    /// Nothing to report (a spurious wake-up, an empty counter, a sample that crossed no mark).
    case quiet
    /// Read the cgroup now: the source says what it asks for by itself (``WakeHint/readNow``:
    /// only "something changed, look"; or a level at least) and names itself; then watch it as
    /// `then` says.
    case wake(WakeHint, PressureSignal, then: PressureSourceFollowUp = .keepWatching)
    /// The source went away for good (a PSI trigger whose cgroup is gone): stop watching it and
    /// log `reason`; the monitor runs on with its other sources.
    case gone(reason: String)
    /// The monitor cannot go on (the cgroup was removed): it stops with this error.
    case failed(CgroupError)
    /// A read failed transiently (out of descriptors or memory): drain again after a backoff.
    case retry(CgroupError)
}

/// What happens to a descriptor source after it woke the monitor.
enum PressureSourceFollowUp {
    /// Go on watching.
    case keepWatching
    /// Stop watching for this long, then go on (a source that floods: coalesce it).
    case pause(Duration)
    /// Stop watching it (its writer closed).
    case stopWatching
}
