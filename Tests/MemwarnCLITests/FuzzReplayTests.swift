import Foundation
import MemwarnTestKit
import Testing

/// The fuzzer's targets (`Scripts/fuzz`, run in CI) replayed in a normal build: every seed
/// fixture and every past finding under `Tests/Fixtures/fuzz/<target>/` goes through its parser
/// and must come back (a crash or trap fails the replay).
@Suite struct FuzzReplayTests {
    static let fuzz = ChildProcess.productsDirectory + "/memwarn-fuzz"
    static let repository: String = {
        var path = #filePath
        for _ in 0..<3 { path = String(path[..<path.lastIndex(of: "/")!]) }
        return path
    }()

    /// Every target with its seed files and findings.
    static func inputs() throws -> [(target: String, files: [String])] {
        let list = try ChildProcess.run([fuzz, "--list"])
        try #require(list.status == 0, "\(list.standardError)")
        let fixtures = repository + "/Tests/CgroupKitTests/Fixtures"
        let everyFixture =
            (FileManager.default.enumerator(atPath: fixtures)?.allObjects as? [String] ?? []).map { fixtures + "/" + $0 }
            + [repository + "/Config/memwarn.conf"]
        return list.standardOutput.split(separator: "\n").map { line in
            let fields = line.split(separator: "\t", omittingEmptySubsequences: false)
            let target = String(fields[0])
            let seeds = fields.count > 1 ? fields[1].split(separator: " ").map(String.init) : []
            let seeded = everyFixture.filter { file in seeds.contains { file.hasSuffix("/" + $0) } }
            let findings = repository + "/Tests/Fixtures/fuzz/" + target
            let found = ((try? FileManager.default.contentsOfDirectory(atPath: findings)) ?? []).map { findings + "/" + $0 }
            return (target, seeded + found)
        }
    }

    @Test func everySeedAndEveryPastFindingGoesThroughItsParser() throws {
        let inputs = try Self.inputs()
        #expect(inputs.count == 14, "the targets: \(inputs.map(\.target))")
        #expect(inputs.filter { !$0.files.isEmpty }.count >= 6, "the file parsers have seeds among the fixtures")
        for (target, files) in inputs where !files.isEmpty {
            let result = try ChildProcess.run([Self.fuzz, target] + files)
            #expect(result.status == 0, "\(target): \(result.standardError)")
            #expect(result.standardOutput.split(separator: "\n").count == files.count, "\(target): every file replayed")
        }
    }
}
