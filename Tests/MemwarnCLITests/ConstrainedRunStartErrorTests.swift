import Logging
import MemwarnSoak
import Testing

/// A run that cannot start says why with a code, before it makes any cgroup (no root needed).
struct ConstrainedRunStartErrorTests {
    static let logger = Logger(label: "start-error-test")

    @Test func noCommandIsNoCommand() {
        let error = #expect(throws: ConstrainedRun.StartError.self) {
            _ = try ConstrainedRun(ConstrainedRun.Options(command: [], memoryMaxBytes: 64 << 20), logger: Self.logger)
        }
        #expect(error?.code == .noCommand)
    }

    @Test func aCommandNotOnThePathIsCommandNotFoundAndNamesIt() {
        let error = #expect(throws: ConstrainedRun.StartError.self) {
            _ = try ConstrainedRun(
                ConstrainedRun.Options(command: ["/nonexistent/start-error-test"], memoryMaxBytes: 64 << 20), logger: Self.logger)
        }
        #expect(error?.code == .commandNotFound)
        #expect(error?.description.hasPrefix("/nonexistent/start-error-test: command not found") == true)
    }

    @Test func aSoakLegThatNeverBecameReadyIsASetupErrorOfThatKind() {
        #expect(Soak.SetupError.Code(.notReady) == .notReady)
        #expect(Soak.SetupError.Code(.loadFailed) == .loadFailed)
        #expect(Soak.SetupError.Code(.serviceExited) == .exitedEarly)
        #expect(Soak.SetupError.Code(.duration) == .failed)
    }
}
