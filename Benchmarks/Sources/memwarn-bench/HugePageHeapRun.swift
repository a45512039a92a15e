import Foundation
import MemwarnTestKit

/// The release benchmark, for `[UInt8]` values only, run again in a child process whose glibc heap is on transparent huge
/// pages (`GLIBC_TUNABLES=glibc.malloc.hugetlb=1`, which glibc reads only at start-up, hence
/// the child). The kernel then takes freed memory back 2 MiB at a time.
struct HugePageHeapRun {
    static let tunables = "glibc.malloc.hugetlb=1"
    /// The flag that makes `memwarn-bench release` the child: it measures and prints JSON only.
    static let childFlag = "--huge-page-heap-child"

    /// The child's table (its stderr) and JSON object (its stdout).
    var table: String
    var json: String
    /// The child's median full release with `trimsHeap`, in ms, and whether it met the goal.
    var fullReleaseMilliseconds: Double?
    var goalMet: Bool?

    static func run() throws -> HugePageHeapRun {
        let executable = ChildProcess.runningExecutable ?? CommandLine.arguments[0]
        // The child's table goes to a file: with two pipes, one could fill while the other is read.
        let tablePath = FileManager.default.temporaryDirectory.appendingPathComponent("memwarn-bench-\(getpid())-huge-page-heap.txt")
        guard FileManager.default.createFile(atPath: tablePath.path, contents: nil) else {
            throw BenchmarkError("cannot create \(tablePath.path)")
        }
        defer { try? FileManager.default.removeItem(at: tablePath) }

        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = ["release", "--json", childFlag]
        var environment = ProcessInfo.processInfo.environment
        environment["GLIBC_TUNABLES"] = tunables
        process.environment = environment
        let output = Pipe()
        process.standardOutput = output
        process.standardError = try FileHandle(forWritingTo: tablePath)
        try process.run()
        let jsonData = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let table = (try? String(contentsOf: tablePath, encoding: .utf8)) ?? ""
        guard process.terminationReason == .exit, process.terminationStatus == 0 else {
            throw BenchmarkError("the huge-page heap run failed (status \(process.terminationStatus)):\n\(table)")
        }
        var result = HugePageHeapRun(table: table.trimmingCharacters(in: .whitespacesAndNewlines),
                                     json: String(decoding: jsonData, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
        guard let object = try JSONSerialization.jsonObject(with: jsonData) as? [String: Any] else {
            throw BenchmarkError("the huge-page heap run printed no JSON object")
        }
        let values = ReleasedValues.arrays.rawValue
        result.goalMet = (object["goal_met"] as? [String: Any])?[values] as? Bool
        let scenarios = object["scenarios"] as? [[String: Any]] ?? []
        let full = scenarios.first { $0["values"] as? String == values && $0["release"] as? String == "everything" && $0["trims_heap"] as? Bool == true }
        result.fullReleaseMilliseconds = (full?["release_ms"] as? NSNumber)?.doubleValue
        return result
    }
}
