public import CgroupKit
import MemwarnSystem

#if canImport(Glibc)
import Glibc
#endif

/// Samples a cgroup's usage every 2 ms on a thread of its own, from outside every service, and
/// finds the episodes of pressure: from the first reading at or above the warning mark to the
/// first one back under the recovery mark. A measure that does not depend on who relieved the
/// parent (the agent, or each service on its own).
public final class ParentUsageRecorder: Sendable {
    /// One episode: how long the parent stayed at or above the recovery mark after crossing the
    /// warning mark, and the highest usage read meanwhile. `nil` duration: not over when recording stopped.
    public struct Episode: Sendable {
        public var duration: Duration?
        public var peakBytes: UInt64
    }

    private let state = Locked<(episodes: [Episode], open: (began: ContinuousClock.Instant, peak: UInt64)?, stopped: Bool, peak: UInt64)>(([], nil, false, 0))
    private let ended = ConditionLock(false)

    /// Starts sampling `cgroup`'s usage against `limit` with the given marks (shares of it).
    ///
    /// - Throws: ``ChildProcessError`` when the thread cannot be started.
    public init(_ cgroup: CgroupLocation, limit: UInt64, warningRatio: Double = 0.8, recoveryRatio: Double = 0.7) throws(ChildProcessError) {
        let warning = UInt64(Double(limit) * warningRatio)
        let recovery = UInt64(Double(limit) * recoveryRatio)
        let reader = CgroupMemoryReader(location: cgroup)
        do {
            try SystemThread.start(name: "memwarn-parent") { [state, ended] in
                while !state.withLock({ $0.stopped }) {
                    if let usage = try? reader.usage() {
                        let now = ContinuousClock.now
                        state.withLock { state in
                            state.peak = max(state.peak, usage)
                            if var open = state.open {
                                open.peak = max(open.peak, usage)
                                if usage < recovery {
                                    state.episodes.append(Episode(duration: now - open.began, peakBytes: open.peak))
                                    state.open = nil
                                } else {
                                    state.open = open
                                }
                            } else if usage >= warning {
                                state.open = (now, usage)
                            }
                        }
                    }
                    usleep(2000)
                }
                ended.withLock { $0 = true }
            }
        } catch {
            throw ChildProcessError("the parent's recorder could not start: \(error)")
        }
    }

    /// Stops sampling and returns the episodes (an episode still open last, without a duration)
    /// and the highest usage read.
    public func stop() -> (episodes: [Episode], peakBytes: UInt64) {
        state.withLock { $0.stopped = true }
        _ = ended.wait(timeout: .seconds(5)) { $0 ? true : nil }
        return state.withLock { state in
            (state.episodes + (state.open.map { [Episode(duration: nil, peakBytes: $0.peak)] } ?? []), state.peak)
        }
    }
}
