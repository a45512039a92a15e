import CgroupKit
import MemwarnSystem

/// Registers cgroup v1 usage thresholds on a thread of its own, after the monitor is armed.
///
/// The kernel waits for an RCU grace period inside every usage-threshold registration
/// (`synchronize_rcu()` in `__mem_cgroup_usage_register_event`, under a per-cgroup mutex): 17.6 ms
/// each and 229 ms for the 13 thresholds and guards of the default policy at the median on the
/// development machine (`Benchmarks/run armed`). Registered on the loop thread before arming, they kept the monitor deaf for
/// that long at start-up. Here each one is handed to the loop as soon as it is registered, and
/// usage is sampled continuously until the last one is in.
enum ThresholdRegistrar {
    /// One threshold to register.
    struct Request: Sendable, Hashable {
        /// The cgroup whose usage it watches (the watched cgroup, or a limited ancestor).
        var cgroup: CgroupLocation
        /// The ``UsageGauge`` key of the limit it belongs to (``UsageSampling/key(of:)``).
        var gauge: String
        /// The usage in bytes whose crossing (either way) the kernel reports.
        var bytes: UInt64
        /// Its line in `watchedSources`.
        var description: String
    }

    /// What to register, and where.
    struct Plan: Sendable {
        var files: KernelFiles
        var requests: [Request]
    }

    /// What the registrar hands the loop thread.
    enum Delivery {
        /// A threshold registered: watch it.
        case registered(CgroupV1Notification)
        /// Every threshold is registered.
        case finished(count: Int, took: Duration, gauges: Set<String>)
        /// A registration failed: the monitor goes on sampling usage continuously.
        case failed(CgroupError, registered: Int)
    }

    /// Starts the thread. `deliver` runs on the loop thread (through ``EventLoop/execute(_:)``),
    /// once a threshold, then once at the end. `cancelled` is looked at before each registration
    /// (one under way finishes and is delivered: the engine drops deliveries after it tore down),
    /// and a delivery the stopped loop never runs closes its notification when dropped.
    ///
    /// - Throws: ``SystemError`` when the thread cannot be started.
    static func start(_ plan: Plan, loop: EventLoop, cancelled: Locked<Bool>, deliver: @escaping (Delivery) -> Void) throws(SystemError) {
        let handOff = ThreadConfined(deliver, on: loop)
        try SystemThread.start(name: "memwarn-thresh") { [cancelled] in
            let began = ContinuousClock.now
            var registered = 0
            for request in plan.requests {
                guard !cancelled.withLock({ $0 }) else { return }
                let notification: CgroupV1Notification
                do {
                    notification = try CgroupV1Notification(
                        cgroup: request.cgroup, file: "memory.usage_in_bytes", argument: String(request.bytes), files: plan.files,
                        hint: .readNow, signal: .usageThreshold, quietTime: ThresholdPlanner.quietAfterFiring,
                        description: request.description)
                } catch {
                    let failure = (error as? CgroupError) ?? CgroupError(.unwritable, "\(error)", path: request.cgroup.file("cgroup.event_control"))
                    let count = registered
                    loop.execute { handOff.value(.failed(failure, registered: count)) }
                    return
                }
                registered += 1
                let box = ThreadConfined(notification, on: loop)
                loop.execute { handOff.value(.registered(box.value)) }
            }
            let took = ContinuousClock.now - began
            let count = registered
            let gauges = Set(plan.requests.map(\.gauge))
            loop.execute { handOff.value(.finished(count: count, took: took, gauges: gauges)) }
        }
    }
}
