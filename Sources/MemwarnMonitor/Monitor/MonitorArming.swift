/// How a monitor was armed: how long it took, and how changes of usage reach it.
///
/// A ``PressureMonitor`` is armed by its initializer — the cgroup found, every source opened and
/// registered, the first reading taken and the release thread started — so that on the
/// README's pattern it protects the services of a `ServiceGroup` from their first instruction.
/// ``PressureMonitor/run()`` keeps it running; a monitor run again after it stopped is armed
/// anew by that run.
package struct MonitorArming: Sendable, Hashable {
    /// How changes of usage reach the monitor.
    package struct UsageWatch: Sendable, Hashable, CustomStringConvertible {
        /// The name, as `memwarn status --json` prints it (`usageWatch`).
        package let name: String

        private init(_ name: String) { self.name = name }

        /// Kernel events: cgroup v1 usage thresholds (as root), with guard bands below each mark
        /// sampled for crossings the kernel does not report.
        package static let thresholds = UsageWatch("thresholds")
        /// Adaptive sampling: cgroup v2, a cgroup v1 monitor not run as root, a host without a
        /// limit (``PressurePolicy/worstCaseGrowthBytesPerSecond``).
        package static let adaptiveSampling = UsageWatch("adaptive-sampling")
        /// A fixed poll every ``PressurePolicy/pollInterval`` (adaptive sampling turned off).
        package static let polling = UsageWatch("polling")

        package var description: String { name }
    }

    /// From the start of arming (the initializer, or a later ``PressureMonitor/run()``) to armed.
    package var duration: Duration
    /// From the process's start to armed, as the kernel counts the start (to 10 ms; see
    /// CgroupKit's `ProcessAge`); `nil` when `/proc/self/stat` could not be read.
    package var sinceProcessStart: Duration?
    /// How changes of usage reached the monitor when it was armed (`usageWatch`
    /// says how they reach it now).
    package var usageWatch: UsageWatch
    /// cgroup v1 as root: the usage thresholds still being registered when the monitor was armed.
    /// The kernel waits for an RCU grace period inside each registration (17.6 ms each at the median on the
    /// development machine), so they are registered after arming, on a thread of their own, while
    /// usage is sampled adaptively; `usageWatch` turns to ``UsageWatch/thresholds``
    /// once they are in.
    package var pendingThresholds: Int
    /// How long registering the pending thresholds took, once they are all in (`nil` before, and
    /// where there were none); they are registered right after arming.
    package var thresholdsRegisteredAfter: Duration?
    /// What it listens to, as `watchedSources` lists it.
    package var sources: [String]

    /// Creates a report.
    ///
    /// - Parameters:
    ///   - duration: how long arming took.
    ///   - sinceProcessStart: the process's age when armed, or `nil`.
    ///   - usageWatch: how changes of usage reached the monitor when armed.
    ///   - pendingThresholds: usage thresholds still being registered.
    ///   - sources: what it listens to.
    package init(duration: Duration, sinceProcessStart: Duration?, usageWatch: UsageWatch, pendingThresholds: Int = 0, sources: [String]) {
        self.duration = duration
        self.sinceProcessStart = sinceProcessStart
        self.usageWatch = usageWatch
        self.pendingThresholds = pendingThresholds
        self.sources = sources
    }
}
