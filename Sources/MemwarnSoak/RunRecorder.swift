package import MemwarnRelease
import MemwarnSystem

/// What a constrained run records as it goes: its usage samples and its level changes, the one
/// store of both. ``ConstrainedRun`` writes into it and makes its report from it; a soak's leg
/// reads it while the run goes on (the progress line, the plot rewritten as it goes).
package final class RunRecorder: Sendable {
    private struct Record {
        var samples: [SoakSample] = []
        var levelChanges: [ConstrainedRunReport.LevelChange] = []
    }

    private let record = Locked(Record())

    /// An empty record, at normal.
    package init() {}

    /// Records a usage reading.
    ///
    /// - Parameter sample: the reading.
    package func record(_ sample: SoakSample) {
        record.withLock { $0.samples.append(sample) }
    }

    /// Records a level change.
    ///
    /// - Parameters:
    ///   - level: the level entered.
    ///   - seconds: seconds since the run started.
    ///   - usageBytes: the usage the monitor read with it.
    package func record(_ level: MemoryPressureLevel, at seconds: Double, usageBytes: UInt64) {
        record.withLock { record in
            record.levelChanges.append(.init(seconds: seconds, level: level.rawValue, usageBytes: usageBytes))
        }
    }

    /// The usage readings so far, oldest first.
    package var samples: [SoakSample] { record.withLock { $0.samples } }

    /// The level changes so far, oldest first.
    package var levelChanges: [ConstrainedRunReport.LevelChange] { record.withLock { $0.levelChanges } }

    /// The level last entered (normal before the first change).
    package var level: MemoryPressureLevel {
        record.withLock { $0.levelChanges.last.flatMap { MemoryPressureLevel(rawValue: $0.level) } ?? .normal }
    }
}
