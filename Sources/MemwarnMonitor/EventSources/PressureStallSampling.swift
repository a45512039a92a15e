import CgroupKit
import Logging
import MemwarnRelease
import MemwarnSystem

/// PSI's documented fallback where the kernel refused a trigger: the PSI file's `total` read
/// every poll interval, the share of time stalled since the last read compared with the
/// policy's percentage (``PressureSampler``).
final class PressureStallSampling: PressureSource {
    private var sampler: PressureSampler
    private let level: MemoryPressureLevel
    private let files: KernelFiles
    private let interval: Duration
    private let logger: Logger

    init(_ sampler: PressureSampler, level: MemoryPressureLevel, every interval: Duration, files: KernelFiles, logger: Logger) {
        self.sampler = sampler
        self.level = level
        self.interval = interval
        self.files = files
        self.logger = logger
    }

    var period: Duration? { interval }

    var description: String {
        "poll \(sampler.path) \(sampler.kind.rawValue) total every \(interval) (trigger refused: \(sampler.reason.message))"
    }

    func drain(_ fired: EpollEvents) -> PressureSourceReport {
        let stall: PressureStall
        do {
            stall = try PressureStall.parse(files.read(sampler.path), path: sampler.path)
        } catch  where error.isTransient {
            logger.debug("PSI not read this poll", metadata: ["error": "\(error)"])  // usage still is, at this wake
            return .wake(.readNow, .poll)
        } catch {
            return .failed(error)
        }
        if let percent = sampler.sample(stall, at: .now), percent >= sampler.percent {
            return .wake(WakeHint(atLeast: level), .poll)
        }
        return .wake(.readNow, .poll)
    }
}
