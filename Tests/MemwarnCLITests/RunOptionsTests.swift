import CgroupKit
import Foundation
import MemwarnTestKit
import Testing

#if canImport(Glibc)
import Glibc
#endif

extension RunCommandTests {
    /// `memwarn run`'s options and messages: `--json`, the help's hog example, the exit statuses its
    /// help lists, and the hint for a user who may not create cgroups. Nested in the serialized
    /// `memwarn run` suite: these runs' cgroups must not meet its check that none is left.
    @Suite(.serialized)
    struct RunOptionsTests {
        static let memwarn = ChildProcess.productsDirectory + "/memwarn"

        static func object(_ text: some StringProtocol) throws -> [String: Any] {
            try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any], "\(text)")
        }

        /// A decoded JSON object written again with sorted keys, to compare two.
        static func canonical(_ object: [String: Any]) throws -> String {
            String(decoding: try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]), as: UTF8.self)
        }

        @Test func jsonPrintsTheReportAsOneLineAfterTheCommandsOutputAndTheReportFileStays() throws {
            let reportFile = RunCommandTests.temporaryFile("json.json")
            defer { try? FileManager.default.removeItem(atPath: reportFile) }
            let result = try ChildProcess.run([
                Self.memwarn, "run", "--memory-max", "32M", "--json", "--report", reportFile, "--",
                "/bin/sh", "-c", "echo inside; exit 3",
            ])
            #expect(result.status == 3, "\(result.standardError)")
            let lines = result.standardOutput.split(separator: "\n")
            #expect(lines.count == 2 && lines.first == "inside", "\(result.standardOutput)")
            let report = try Self.object(try #require(lines.last))
            #expect(report["exitCode"] as? Int == 3)
            #expect((report["exit"] as? [String: Any])?["status"] as? Int == 3)
            #expect(report["memoryMaxBytes"] as? Int == 32 << 20)
            #expect(report["oomKills"] as? Int == 0)
            #expect(report["cgroupRemoved"] as? Bool == true)
            #expect(report["command"] as? [String] == ["/bin/sh", "-c", "echo inside; exit 3"])
            let file = try Self.object(String(contentsOfFile: reportFile, encoding: .utf8))
            #expect(try Self.canonical(file) == Self.canonical(report), "the file holds the same report")
            #expect(result.standardError.contains("exited with status 3"), "the summary still goes to stderr")
        }

        /// `memwarn run --help`'s example with the hog, run as written (the paths made this build's).
        @Test func theHelpsHogExampleRunsAsWritten() throws {
            let help = try ChildProcess.run([Self.memwarn, "run", "--help"]).standardOutput
            let lines = help.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
            var index = try #require(lines.indices.dropLast().first { lines[$0].contains("memwarn run") && lines[$0 + 1].contains("memwarn-hog") })
            var example = lines[index]
            while example.hasSuffix("\\"), index + 1 < lines.count {
                index += 1
                example = String(example.dropLast()) + lines[index]
            }
            let comment = example.range(of: "#").map { String(example[$0.upperBound...]) } ?? ""
            let expected = try #require(comment.range(of: "exit [0-9]+", options: .regularExpression).flatMap { Int32(comment[$0].dropFirst(5)) })
            let reportFile = RunCommandTests.temporaryFile("example.json")
            defer { try? FileManager.default.removeItem(atPath: reportFile) }
            let words = (example.range(of: "#").map { String(example[..<$0.lowerBound]) } ?? example).split(separator: " ").map { word in
                switch word {
                case "memwarn": Self.memwarn
                case ".build/debug/memwarn-hog": RunCommandTests.hog
                case "run.json": reportFile
                default: String(word)
                }
            }
            #expect(words.contains("--allocate") && words.last == "100M", "\(words)")
            let result = try ChildProcess.run(words)
            #expect(result.status == expected, "\(words): \(result.standardError)")
            let report = try Self.object(String(contentsOfFile: reportFile, encoding: .utf8))
            #expect(report["oomKills"] as? Int == 1, "the hog outgrew the limit")
            #expect(report["exitCode"] as? Int == Int(expected))
        }

        /// The statuses `run --help` lists, each caused.
        @Test func theExitStatusesItsHelpListsAreTheOnesItExitsWith() throws {
            let cases: [(arguments: [String], status: Int32, error: String?)] = [
                (["--memory-max", "32M", "--", "/bin/sh", "-c", "exit 7"], 7, nil),
                (["--memory-max", "32M", "--", "/bin/sh", "-c", "kill -TERM $$"], 128 + SIGTERM, nil),
                (["--memory-max", "lots", "--", "/bin/true"], 64, "Error: --memory-max: "),
                (["--memory-max", "32M", "--config", "/nonexistent/memwarn.conf", "--", "/bin/true"], 125, "Error: policy file /nonexistent/memwarn.conf"),
                (["--memory-max", "32M", "--", "/nonexistent/command"], 127, "Error: /nonexistent/command: command not found"),
            ]
            for (arguments, status, error) in cases {
                let result = try ChildProcess.run([Self.memwarn, "run"] + arguments)
                #expect(result.status == status, "\(arguments): \(result.standardError)")
                if let error { #expect(result.standardError.hasPrefix(error), "\(arguments): \(result.standardError)") }
            }
        }

        /// A user who may not create cgroups (nobody, on this host's cgroup v1) is told so and
        /// how to get permission, in one line, not in libcgroup's numbers.
        @Test func withoutPermissionToCreateCgroupsItSaysHowToGetIt() throws {
            let marker = RunCommandTests.temporaryFile("unprivileged-ran")
            defer { try? FileManager.default.removeItem(atPath: marker) }
            let result = try ChildProcess.run(
                ChildProcess.asNobody + [
                    Self.memwarn, "run", "--memory-max", "64M", "--", "/usr/bin/touch", marker,
                ])
            #expect(result.status == 125)
            let lines = result.standardError.split(separator: "\n")
            #expect(lines.count == 1, "one line: \(result.standardError)")
            let line = String(lines.first ?? "")
            #expect(line.hasPrefix("Error: cannot create the cgroup \(try RunCommandTests.ownCgroupDirectory())/memwarn-run-"), "\(line)")
            #expect(line.contains("permission denied") && line.contains("needs root"), "\(line)")
            #expect(line.contains("systemd-run --user --scope -p Delegate=yes"), "\(line)")
            #expect(!line.contains("libcgroup") && !line.contains("5000"), "no raw libcgroup error: \(line)")
            #expect(!FileManager.default.fileExists(atPath: marker), "the command never ran")
            #expect(result.standardOutput.isEmpty)
        }
    }
}
