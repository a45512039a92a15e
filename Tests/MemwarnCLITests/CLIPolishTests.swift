import Foundation
import MemwarnTestKit
import MemwarnTestTraits
import Testing

/// CLI details that need no cgroup: `--version`, the exit status in every `--help`,
/// and sizes for `memwarn-hog`.
@Suite
struct CLIPolishTests {
    static let memwarn = ChildProcess.productsDirectory + "/memwarn"
    static let hog = ChildProcess.productsDirectory + "/memwarn-hog"

    @Test func versionPrintsTheVersionTheChangelogNames() throws {
        let result = try ChildProcess.run([Self.memwarn, "--version"])
        #expect(result.status == 0)
        let version = result.standardOutput.trimmingCharacters(in: .newlines)
        #expect(version.split(separator: ".").count == 3 && version.split(separator: ".").allSatisfy { Int($0) != nil }, "\(version)")
        let changelog = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../CHANGELOG.md")
        let headings = try String(contentsOf: changelog, encoding: .utf8).split(separator: "\n").filter { $0.hasPrefix("## ") }
        #expect(headings.first?.hasPrefix("## \(version)") == true, "the newest CHANGELOG heading: \(headings.first ?? "none")")
    }

    @Test(arguments: [
        ("status", ["0", "1", "64"]), ("watch", ["0", "1", "64"]), ("trigger", ["0", "1", "64"]), ("soak", ["0", "1", "64"]),
        ("agent", ["0", "1", "64"]),
        ("run", ["N", "128+N", "64", "125", "126", "127", "1"]),
    ])
    func everySubcommandsHelpListsItsExitStatus(subcommand: String, codes: [String]) throws {
        let result = try ChildProcess.run([Self.memwarn, subcommand, "--help"])
        #expect(result.status == 0)
        let help = result.standardOutput
        let section = try #require(help.range(of: "Exit status:").map { String(help[$0.upperBound...]) }, "\(subcommand) --help has no exit status")
        for code in codes {
            #expect(
                section.range(of: "(^|[^0-9+])\(NSRegularExpression.escapedPattern(for: code))([^0-9+]|$)", options: .regularExpression) != nil,
                "\(subcommand) --help names exit status \(code)")
        }
    }

    @Test(arguments: [("10M", 10 << 20), ("6MiB", 6 << 20), ("1.5M", 3 << 19), ("512k", 512 << 10), ("8388608", 8 << 20), ("0", 0)])
    func theHogHoldsASizeGivenWithAUnit(size: String, bytes: Int) throws {
        let reply = try Self.hogReply(to: "hold \(size)").split(separator: " ")
        #expect(reply.first == "held" && reply.dropFirst().first == "\(bytes)", "\(reply)")
    }

    /// Starts a hog, sends it `command` then `exit`, and returns its one reply; expects it to exit 0.
    static func hogReply(to command: String) throws -> String {
        let hog = try LineChild([Self.hog])
        try hog.send(command)
        try hog.send("exit")
        let reply = try hog.nextLine()
        #expect(try hog.waitForExit() == 0)
        return reply
    }

    @Test(arguments: [
        // 1e16 used to trap (exit 132), and 1e-9 was rounded to 0 ("did not survive").
        ("1e16", "out of range: a soak runs from 1s to 24h"), ("1e-9", "out of range"), ("0s", "out of range"),
        ("86401", "out of range"), ("soon", "is not a duration"),
    ])
    func aSoakDurationOutOfRangeIsABadArgument(duration: String, message: String) throws {
        let result = try ChildProcess.run([Self.memwarn, "soak", "--duration", duration])
        #expect(result.status == 64, "\(duration): exit \(result.status): \(result.standardError)")
        #expect(result.standardError.contains(message), "\(duration): \(result.standardError)")
    }

    @Test(arguments: [["run", "--memory-max", "0", "--", "true"], ["soak", "--memory-max", "0"]])
    func aZeroLimitSaysWhatIsWrongWithIt(arguments: [String]) throws {
        // "0" was "not a size"; it is a size, below the smallest limit.
        let result = try ChildProcess.run([Self.memwarn] + arguments)
        #expect(result.status == 64 && result.standardError.contains("0 is below the smallest limit, 1M"), "\(result.standardError)")
    }

    // A negative value was taken for an option and reported as "Missing value".
    @Test(arguments: [
        (["run", "--memory-max", "-5M", "--", "true"], "--memory-max: \"-5M\" is negative"),
        (["run", "--memory-max", "64M", "--memory-high", "-5M", "--", "true"], "--memory-high: \"-5M\" is negative"),
        (["soak", "--memory-max", "-5M"], "--memory-max: \"-5M\" is negative"),
        (["soak", "--limits", "64M,-5M"], "--limits: \"-5M\" is negative"),
        (["soak", "--duration", "-5s"], "--duration: \"-5s\" is negative"),
        (["soak", "--ready-after", "-1s", "--", "true"], "--ready-after: \"-1s\" is negative"),
        (["trigger", "--pid", "-3"], "--pid takes a positive process ID; got -3"),
        (["trigger", "--all", "--target-bytes", "-1"], "--target-bytes: \"-1\" is negative"),
        (["agent", "--min-available", "-500M"], "--min-available: \"-500M\" is negative"),
        (["status", "--growth-sample", "-1s"], "--growth-sample must be a duration"),
        (["run", "--memory-max", "--json", "--", "true"], "--memory-max: \"--json\" is an option, not a size"),
    ])
    func aNegativeValueIsNamedAsOne(arguments: [String], message: String) throws {
        let result = try ChildProcess.run([Self.memwarn] + arguments)
        #expect(result.status == 64, "\(arguments): \(result.standardError)")
        #expect(result.standardError.contains(message) && !result.standardError.contains("Missing value"), "\(arguments): \(result.standardError)")
    }

    /// The README's first screen named no set-up command, no way to put
    /// `memwarn` on the PATH, and no documentation build, and its manifest line named a tag that
    /// does not exist.
    @Test func theReadmesFirstScreenSaysHowToSetUpInstallAndDocumentAndItsManifestLineResolves() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        let firstScreen = readme.split(separator: "\n", omittingEmptySubsequences: false).prefix(40).joined(separator: "\n")
        for needed in ["make demo", "make test", "make setup", "make install", "PATH", "make docs"] {
            #expect(firstScreen.contains(needed), "the first screen does not say \(needed)")
        }
        let tags = try ChildProcess.run(["/usr/bin/git", "-C", root.path, "tag", "--list"]).standardOutput.split(separator: "\n").map(String.init)
        for line in readme.split(separator: "\n") where line.contains(".package(url:") && line.contains("memwarn/memwarn") && line.contains("from:") {
            let version = line.split(separator: "\"").dropFirst(3).first.map(String.init) ?? ""
            #expect(tags.contains(version) || tags.contains("v" + version), "the manifest line names \(version), which is not a tag: \(line)")
        }
        for target in ["setup", "install", "docs"] {
            let dryRun = try ChildProcess.run(["/usr/bin/make", "-C", root.path, "-n", target])
            #expect(dryRun.status == 0, "make \(target): \(dryRun.standardError)")
        }
    }

    /// Without a limit, `status` said "646.6 MiB of no limit" and "the limit in 49455.2 s".
    @Test(.needsUnlimitedOwnCgroup) func statusWithoutALimitSaysWhatUsageIsMeasuredAgainst() throws {
        let result = try ChildProcess.run([Self.memwarn, "status"], environment: ["MEMWARN_ANCESTOR_LIMITS=ignore"])
        #expect(result.status == 0 && result.standardOutput.contains("(no cgroup limit)"), "\(result.standardOutput)\(result.standardError)")
        #expect(!result.standardOutput.contains("of no limit") && !result.standardOutput.contains("the limit in"), "\(result.standardOutput)")
        #expect(result.standardOutput.contains("of the system's"), "\(result.standardOutput)")
    }

    @Test func theHogAllocatesASizeAndRefusesWhatIsNone() throws {
        let allocated = try ChildProcess.run([Self.hog, "--allocate", "2.5M"])
        #expect(allocated.status == 0, "\(allocated.standardError)")
        for bad in ["lots", "64X", "-5M", ""] {
            let refused = try ChildProcess.run([Self.hog, "--allocate", bad])
            #expect(refused.status == 2, "\(bad)")
            #expect(
                refused.standardError.hasPrefix(
                    "usage: memwarn-hog [--allocate <size> | --endpoint <dir> hang|lie|overflow|mute|late|slow|stall|huge|endless [<sockets>]]"),
                "\(bad): \(refused.standardError)")
        }
        #expect(try Self.hogReply(to: "hold 64X").hasPrefix("error: expected \"hold <size>\""))
    }
}
