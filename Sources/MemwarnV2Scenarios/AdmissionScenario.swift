import CgroupKit
import MemwarnMonitor
import MemwarnTestKit

/// `MemoryAdmission` on cgroup v2: the headroom below the critical mark of
/// `memory.max` 64 MiB, with `memory.current` read afresh — half of it reserved, the rest
/// refused beside it, and a hog's growth seen at the next decision, not at the next reading.
enum AdmissionScenario {
    static let scenario = Scenario(name: "admission", timeLimit: .seconds(60), body: run)
    static let limit = 64 * mebibyte

    static func run(_ context: ScenarioContext) async throws {
        let cgroup = try context.makeCgroup(memoryMax: limit)
        let hog = try MemoryHog(in: cgroup, binary: context.products.hog)
        let recording = MonitorRecording(
            context, watching: cgroup, policy: .scenario(pollInterval: .seconds(60), holdTime: .zero),
            watchesPressureStall: false)
        _ = try await recording.start()
        let admission = MemoryAdmission(monitor: recording.monitor, freshness: .zero)
        try await hog.hold(0.5, of: limit)
        let room = try require(admission.headroomBytes, "no headroom without a reading")
        let usage = Int(try cgroup.usage())
        let mark = Int(Double(limit) * 0.9)
        try expect(abs(room - (mark - usage)) < mebibyte, "headroom \(room), critical mark less memory.current \(mark - usage)")
        let half = try require(admission.reserve(bytes: room / 2), "half the headroom was refused")
        try expect(admission.reserve(bytes: room / 2 + 2 * mebibyte) == nil, "the rest was admitted beside the first half")
        half.release()
        try await hog.hold(0.8, of: limit)
        let after = try require(admission.headroomBytes, "no headroom")
        try expect(after < room - 16 * mebibyte, "memory.current read afresh: \(room) then \(after)")
        context.note("64 MiB: headroom \(describe(bytes: room)) at half the limit, \(describe(bytes: after)) at 80 %; half reserved, the rest refused")
    }
}
