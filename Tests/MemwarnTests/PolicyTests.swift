import Testing
#if canImport(Glibc)
import Glibc
#endif
@testable import Memwarn

struct PolicyTests {
    static var configFile: String {
        var path = #filePath
        for _ in 0..<3 { path = String(path[..<path.lastIndex(of: "/")!]) }
        return path + "/Config/memwarn.conf"
    }

    @Test func theShippedConfigFileHoldsExactlyTheBuiltInDefaults() throws {
        let loaded = try PressurePolicy.load(file: Self.configFile, environment: [:])
        #expect(loaded == PressurePolicy())
        #expect(loaded.warningRatio == 0.80 && loaded.criticalRatio == 0.90 && loaded.recoveryRatio == 0.70)
    }

    @Test func environmentVariablesOverrideTheFile() throws {
        let policy = try PressurePolicy.load(file: Self.configFile, environment: ["MEMWARN_WARNING_RATIO": "0.75", "MEMWARN_HOLD_TIME": "250ms"])
        #expect(policy.warningRatio == 0.75)
        #expect(policy.holdTime == .milliseconds(250))
    }

    @Test func anUnknownKeyNamesTheFileAndLine() {
        var policy = PressurePolicy()
        let error = #expect(throws: PolicyError.self) { try policy.apply(fileText: "# ok\nwarning_ratio = 0.8\nwarnin_ratio = 0.7\n", path: "p.conf") }
        #expect(error?.message.hasPrefix("p.conf:3: unknown key \"warnin_ratio\"") == true)
    }

    @Test func badValuesAreRejectedWithTheirOrigin() {
        var policy = PressurePolicy()
        #expect(throws: PolicyError.self) { try policy.apply(fileText: "hold_time = 2 seconds", path: "p.conf") }
        #expect(throws: PolicyError.self) { try policy.apply(fileText: "warning_ratio = high", path: "p.conf") }
        #expect(throws: PolicyError.self) { try policy.apply(fileText: "just words", path: "p.conf") }
        let error = #expect(throws: PolicyError.self) { try PressurePolicy.load(environment: ["MEMWARN_CRITICAL_RATIO": "nan"]) }
        #expect(error?.message.contains("MEMWARN_CRITICAL_RATIO") == true)
    }

    @Test func inconsistentMarksAreRejected() {
        #expect(throws: PolicyError.self) { try PressurePolicy.load(environment: ["MEMWARN_RECOVERY_RATIO": "0.85"]) }
        #expect(throws: PolicyError.self) { try PressurePolicy.load(environment: ["MEMWARN_CRITICAL_RATIO": "2.5"]) }
        #expect(throws: PolicyError.self) { try PressurePolicy.load(environment: ["MEMWARN_PSI_WINDOW": "20s"]) }
    }

    @Test func aMissingPolicyFileIsAnErrorNotTheDefaults() {
        let error = #expect(throws: PolicyError.self) { try PressurePolicy.load(file: "/nonexistent/memwarn.conf", environment: [:]) }
        #expect(error?.message.contains("/nonexistent/memwarn.conf") == true)
    }

    @Test func durationsTakeUnits() {
        #expect(PressurePolicy.duration("250ms") == .milliseconds(250))
        #expect(PressurePolicy.duration("1.5s") == .milliseconds(1500))
        #expect(PressurePolicy.duration("1m") == .seconds(60))
        #expect(PressurePolicy.duration("5") == nil)
        #expect(PressurePolicy.duration("-1s") == nil)
    }
}
