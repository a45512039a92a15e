import Foundation
import MemwarnRelease
import MemwarnSystem
import Testing

@testable import MemwarnMonitor

#if canImport(Glibc)
import Glibc
#endif

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

    @Test func inactivePageCacheIsCountedUnlessThePolicySaysIgnore() throws {
        #expect(try PressurePolicy.load(file: Self.configFile, environment: [:]).countsInactivePageCache)
        #expect(try !PressurePolicy.load(file: Self.configFile, environment: ["MEMWARN_INACTIVE_PAGE_CACHE": "ignore"]).countsInactivePageCache)
        var policy = PressurePolicy()
        try policy.apply(fileText: "inactive_page_cache = ignore\ninactive_page_cache = count\n", path: "p.conf")
        #expect(policy.countsInactivePageCache)
        let error = #expect(throws: PolicyError.self) { try policy.apply(fileText: "inactive_page_cache = yes", path: "p.conf") }
        #expect(error?.code == .badValue && error?.message.contains("must be count or ignore") == true, "\(String(describing: error))")
    }

    @Test func aFileWithWindowsLineBreaksIsReadLineByLine() throws {
        // "\r\n" is one Character; split on "\n" alone, a file that starts with a
        // comment was one comment line, and the defaults applied without a word.
        var policy = PressurePolicy()
        try policy.apply(fileText: "# memwarn policy\r\nwarning_ratio = 0.75\r\nhold_time = 3s\r\n", path: "crlf.conf")
        #expect(policy.warningRatio == 0.75 && policy.holdTime == .seconds(3))
        let error = #expect(throws: PolicyError.self) { try policy.apply(fileText: "# a\r\n# b\r\nwarnin_ratio = 0.7\r\n", path: "crlf.conf") }
        #expect(error?.code == .unknownKey && error?.message.hasPrefix("crlf.conf:3: unknown key") == true, "\(String(describing: error))")
        // The shipped file, as a Windows editor would save it, holds the defaults.
        let shipped = try String(contentsOfFile: Self.configFile, encoding: .utf8).replacingOccurrences(of: "\n", with: "\r\n")
        var windows = PressurePolicy()
        windows.warningRatio = 0.5
        try windows.apply(fileText: shipped, path: "memwarn.conf")
        #expect(windows == PressurePolicy())
    }

    @Test func anUnknownKeyNamesTheFileAndLine() {
        var policy = PressurePolicy()
        let error = #expect(throws: PolicyError.self) { try policy.apply(fileText: "# ok\nwarning_ratio = 0.8\nwarnin_ratio = 0.7\n", path: "p.conf") }
        #expect(error?.code == .unknownKey && error?.message.hasPrefix("p.conf:3: unknown key \"warnin_ratio\"") == true)
        #expect(error?.file.hasSuffix("PressurePolicy+File.swift") == true, "where it was thrown: \(String(describing: error?.debugDescription))")
    }

    @Test func badValuesAreRejectedWithTheirOrigin() {
        var policy = PressurePolicy()
        for (text, code) in [("hold_time = 2 seconds", PolicyError.Code.badValue), ("warning_ratio = high", .badValue), ("just words", .notASetting)] {
            let error = #expect(throws: PolicyError.self) { try policy.apply(fileText: text, path: "p.conf") }
            #expect(error?.code == code, "\(text): \(String(describing: error))")
        }
        let error = #expect(throws: PolicyError.self) { try PressurePolicy.load(environment: ["MEMWARN_CRITICAL_RATIO": "nan"]) }
        #expect(error?.code == .badValue && error?.message.contains("MEMWARN_CRITICAL_RATIO") == true)
    }

    @Test func inconsistentMarksAreRejected() {
        for (key, value) in [("MEMWARN_RECOVERY_RATIO", "0.85"), ("MEMWARN_CRITICAL_RATIO", "2.5"), ("MEMWARN_PSI_WINDOW", "20s")] {
            let error = #expect(throws: PolicyError.self) { try PressurePolicy.load(environment: [key: value]) }
            #expect(error?.code == .inconsistent, "\(key)=\(value): \(String(describing: error))")
        }
    }

    @Test func aMissingPolicyFileIsAnErrorNotTheDefaults() {
        let error = #expect(throws: PolicyError.self) { try PressurePolicy.load(file: "/nonexistent/memwarn.conf", environment: [:]) }
        #expect(error?.code == .unreadableFile && error?.message.contains("/nonexistent/memwarn.conf") == true)
    }

    @Test func durationsTakeUnits() {
        #expect(PressurePolicy.duration("250ms") == .milliseconds(250))
        #expect(PressurePolicy.duration("1.5s") == .milliseconds(1500))
        #expect(PressurePolicy.duration("1m") == .seconds(60))
        #expect(PressurePolicy.duration("5") == nil)
        #expect(PressurePolicy.duration("-1s") == nil)
    }
}

/// A huge duration once trapped ("Double value cannot be converted to
/// Int64") in every process that loaded the policy; now it is a clear error naming the key.
@Suite struct HugeSettingTests {
    @Test(arguments: ["1e16s", "1e300s", "1e15m", "inf", "nan", "-1s", "1e400ms"])
    func aHugeOrNonsenseDurationIsAnErrorNamingTheKey(value: String) {
        #expect(throws: PolicyError.self) { try PressurePolicy.load(environment: ["MEMWARN_HOLD_TIME": value]) }
        do {
            _ = try PressurePolicy.load(environment: ["MEMWARN_PSI_WINDOW": value])
            Issue.record("\(value) accepted")
        } catch {
            #expect("\(error)".contains("MEMWARN_PSI_WINDOW"), "\(error)")
        }
    }

    @Test func aHugeDurationInAPolicyFileIsAnErrorWithItsLine() throws {
        let path = "/tmp/memwarn-huge-setting-\(getpid()).conf"
        defer { unlink(path) }
        try #require(FileManager.default.createFile(atPath: path, contents: Data("warning_ratio = 0.8\npsi_window = 1e300s\n".utf8)))
        do {
            _ = try PressurePolicy.load(file: path, environment: [:])
            Issue.record("accepted")
        } catch {
            #expect("\(error)".contains(":2: psi_window"), "\(error)")
        }
    }
}

/// Private folders, which the demo and the soak write into instead of predictable ones in `/tmp`.
@Suite struct PrivateDirectoryTests {
    @Test func aTemporaryFolderIsFreshUniqueAndOnlyOurs() throws {
        let first = try PrivateDirectory.makeTemporary(prefix: "memwarn-private-test")
        let second = try PrivateDirectory.makeTemporary(prefix: "memwarn-private-test")
        defer {
            rmdir(first)
            rmdir(second)
        }
        #expect(first != second)
        var status = stat()
        #expect(lstat(first, &status) == 0)
        #expect(status.st_mode & S_IFMT == S_IFDIR)
        #expect(status.st_mode & 0o777 == 0o700)
        #expect(status.st_uid == geteuid())
        try PrivateDirectory.prepare(first, purpose: "the test folder")  // ours: accepted
    }
}

/// `--config <fifo>` hung, and `--config /etc/shadow` printed a line of
/// the file in its error.
@Suite struct PolicyFileSafetyTests {
    @Test func aFIFOIsRefusedAtOnce() throws {
        let path = "/tmp/memwarn-policy-fifo-\(getpid())"
        defer { unlink(path) }
        try #require(mkfifo(path, 0o600) == 0)
        do {
            _ = try PressurePolicy.load(file: path, environment: [:])
            Issue.record("a FIFO was read as a policy file")
        } catch {
            #expect(error.message == "policy file \(path): not a regular file")
        }
    }

    @Test func aFileThatIsNotAPolicyIsNeverQuotedBack() throws {
        let path = "/tmp/memwarn-policy-secret-\(getpid())"
        defer { unlink(path) }
        let secret = "root:$6$c2VjcmV0aGFzaA$Zm9vYmFyYmF6cXV4:19000:0:99999:7:::"
        try #require(FileManager.default.createFile(atPath: path, contents: Data((secret + "\n").utf8)))
        do {
            _ = try PressurePolicy.load(file: path, environment: [:])
            Issue.record("accepted")
        } catch {
            #expect(!error.message.contains("root") && !error.message.contains("$6$"), "\(error.message)")
            #expect(error.message == "\(path):1: expected \"key = value\" (this line is not a setting)")
        }
        // A short, plain typo is still shown, so it can be fixed.
        try #require(FileManager.default.createFile(atPath: path, contents: Data("warnig_ratio = 0.8\n".utf8)))
        do {
            _ = try PressurePolicy.load(file: path, environment: [:])
            Issue.record("accepted")
        } catch {
            #expect(error.message.contains("unknown key \"warnig_ratio\""), "\(error.message)")
        }
    }
}
