import Foundation
import MemwarnSoak
import MemwarnTestKit
import MemwarnTestTraits
import Testing

extension RunCommandTests {
    /// `memwarn run` arms its monitor before the command starts, and sets `memory.high` by default
    /// on cgroup v2. Nested in the serialized `memwarn run` suite (its leftover check must not see
    /// these runs).
    @Suite(.serialized)
    struct RunArmingTests {
        static let memwarn = ChildProcess.productsDirectory + "/memwarn"
        static let hog = ChildProcess.productsDirectory + "/memwarn-hog"

        @Test(.tags(.root, .cgroupV1), .needsRealCgroups)
        func aCommandKilledWithinMillisecondsWasWatchedFromItsFirstInstruction() throws {
            // The hog fills 100 MiB under 64 MiB at once: OOM-killed in a few tens of milliseconds.
            // Armed after the command started, the run's monitor saw nothing ("levels entered: none").
            let result = try ChildProcess.run([Self.memwarn, "run", "--memory-max", "64M", "--json", "--", Self.hog, "--allocate", "100M"])
            #expect(result.status == 137, "\(result.standardError)")
            let report = try #require(
                try JSONSerialization.jsonObject(with: Data((result.standardOutput.split(separator: "\n").last ?? "").utf8)) as? [String: Any])
            let levels = (report["levelChanges"] as? [[String: Any]] ?? []).compactMap { $0["level"] as? String }
            #expect(levels.first == "normal", "the first reading, taken before the command started: \(levels)")
            #expect(levels.contains("critical"), "the climb to the kill was seen: \(levels)")
            #expect(!result.standardError.contains("levels entered: none"), "\(result.standardError)")
        }

        @Test func memoryHighDefaultsHalfwayFromTheCriticalMarkToTheLimitOnV2Only() {
            let max: UInt64 = 128 << 20
            #expect(MemoryHighSetting.automatic.bytes(memoryMax: max, criticalRatio: 0.9, isV2: true) == UInt64(Double(max) * 0.95) / 4096 * 4096)
            #expect(MemoryHighSetting.automatic.bytes(memoryMax: max, criticalRatio: 0.9, isV2: false) == nil, "v1 has no memory.high")
            #expect(MemoryHighSetting.automatic.bytes(memoryMax: max, criticalRatio: 1.5, isV2: true) == nil, "no usage-based critical mark")
            #expect(MemoryHighSetting.none.bytes(memoryMax: max, criticalRatio: 0.9, isV2: true) == nil)
            #expect(MemoryHighSetting.bytes(100 << 20).bytes(memoryMax: max, criticalRatio: 0.9, isV2: false) == 100 << 20)
        }

        @Test func memoryHighTakesASizeOrMax() throws {
            let bad = try ChildProcess.run([Self.memwarn, "run", "--memory-max", "64M", "--memory-high", "most", "--", "/bin/true"])
            #expect(bad.status == 64 && bad.standardError.contains("--memory-high"), "\(bad.standardError)")
            let above = try ChildProcess.run([Self.memwarn, "run", "--memory-max", "64M", "--memory-high", "65M", "--", "/bin/true"])
            #expect(above.status == 64, "\(above.standardError)")
        }

        @Test(.tags(.root, .cgroupV1), .needsRealCgroups)
        func memoryHighMaxOnCgroupV1IsNoneAndTheDefaultIsNothingToo() throws {
            // v1 has no memory.high: the default sets none, `max` asks for none, a size is an error.
            for arguments in [[], ["--memory-high", "max"]] {
                let result = try ChildProcess.run([Self.memwarn, "run", "--memory-max", "64M", "--json"] + arguments + ["--", "/bin/true"])
                #expect(result.status == 0, "\(arguments): \(result.standardError)")
            }
            let sized = try ChildProcess.run([Self.memwarn, "run", "--memory-max", "64M", "--memory-high", "60M", "--", "/bin/true"])
            #expect(sized.status == 125 && sized.standardError.contains("memory.high exists only on cgroup v2"), "\(sized.standardError)")
        }
    }
}
