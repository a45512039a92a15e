import Foundation
import MemwarnTestKit
import MemwarnTestTraits
import Testing

/// `memwarn-demo` and `memwarn soak` wrote into predictable folders in
/// `/tmp` that another user could prepare, through the symbolic links planted there. Now the
/// default folders are fresh (`mkdtemp`, mode 0700), and a folder given with `--data-dir` must be
/// this user's and writable by nobody else.
@Suite(.serialized, .tags(.root, .cgroupV1), .needsRealCgroups)
struct PrivateFilesTests {
    static let demo = ChildProcess.productsDirectory + "/memwarn-demo"
    static let memwarn = ChildProcess.productsDirectory + "/memwarn"

    /// A scratch folder of the test's, with a sentinel file an attacker wants overwritten.
    struct Scratch {
        let directory = "/tmp/memwarn-private-files-test-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        var sentinel: String { directory + "/root-owned-sentinel" }
        static let sentinelText = "root's file, not the demo's\n"

        init() throws {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
            try #require(FileManager.default.createFile(atPath: sentinel, contents: Data(Self.sentinelText.utf8)))
        }

        func remove() { try? FileManager.default.removeItem(atPath: directory) }

        /// `folder/media/poster-3.ppm` as a symbolic link to the sentinel.
        func plant(in folder: String) throws {
            try FileManager.default.createDirectory(atPath: folder + "/media", withIntermediateDirectories: true)
            try FileManager.default.createSymbolicLink(atPath: folder + "/media/poster-3.ppm", withDestinationPath: sentinel)
        }

        var sentinelIsIntact: Bool { (try? String(contentsOfFile: sentinel, encoding: .utf8)) == Self.sentinelText }
    }

    @Test func theSoakNeverWritesThroughAFolderPreparedUnderItsOldPredictableName() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        // The attack: plant the soak's old folder for the pid `exec` keeps, then exec it.
        let planted = "/tmp/memwarn-soak-$$-memwarn"
        let script = """
            mkdir -p \(planted)/media && ln -s '\(scratch.sentinel)' \(planted)/media/poster-3.ppm && echo \(planted) > '\(scratch.directory)/planted' \
            && exec '\(Self.memwarn)' soak --duration 2s --no-baseline --memory-max 256M
            """
        let result = try await ChildProcess.runOffThePool(["/bin/sh", "-c", script])
        let plantedPath = try String(contentsOfFile: scratch.directory + "/planted", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        defer { try? FileManager.default.removeItem(atPath: plantedPath) }
        #expect(result.status == 0, "the soak ran: \(result.standardError)")
        #expect(scratch.sentinelIsIntact, "the planted link was not written through")
        #expect(
            (try? FileManager.default.destinationOfSymbolicLink(atPath: plantedPath + "/media/poster-3.ppm")) == scratch.sentinel,
            "the planted folder was not used at all")
    }

    /// `--samples FILE` followed a link at FILE and truncated what it named.
    /// The file is replaced in one step now (a new file renamed over the name): a link there is
    /// replaced, never written through.
    @Test func theSoaksSamplesFileReplacesALinkAtItsNameAndNeverWritesThroughIt() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let samples = scratch.directory + "/samples.json"
        try FileManager.default.createSymbolicLink(atPath: samples, withDestinationPath: scratch.sentinel)
        let result = try await ChildProcess.runOffThePool([
            Self.memwarn, "soak", "--duration", "2s", "--no-baseline", "--memory-max", "256M", "--samples", samples,
        ])
        #expect(result.status == 0, "the soak ran: \(result.standardError)")
        #expect(scratch.sentinelIsIntact, "the link was not written through")
        var status = stat()
        #expect(lstat(samples, &status) == 0 && status.st_mode & S_IFMT == S_IFREG, "a regular file replaced the link")
        let json = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: samples)))
        #expect(json is [String: Any] || json is [Any], "the samples, as JSON")
        let left = try FileManager.default.contentsOfDirectory(atPath: scratch.directory).sorted()
        #expect(left == ["root-owned-sentinel", "samples.json"], "no temporary file left behind: \(left)")
    }

    @Test func theDemoRefusesADataFolderOfAnotherUser() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let folder = scratch.directory + "/theirs"
        try scratch.plant(in: folder)
        #expect(chown(folder, 65_534, 65_534) == 0)  // nobody's
        let result = try ChildProcess.run([Self.demo, "--duration", "1", "--no-memwarn", "--data-dir", folder])
        #expect(result.status == 1)
        #expect(result.standardError.contains("is owned by uid 65534"), "\(result.standardError)")
        #expect(scratch.sentinelIsIntact)
    }

    @Test(arguments: ["symbolic link", "writable by others"])
    func theDemoRefusesADataFolderOthersCouldChange(kind: String) throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let folder = scratch.directory + "/data"
        if kind == "symbolic link" {
            let target = scratch.directory + "/elsewhere"
            try scratch.plant(in: target)
            try FileManager.default.createSymbolicLink(atPath: folder, withDestinationPath: target)
        } else {
            try scratch.plant(in: folder)
            #expect(chmod(folder, 0o777) == 0)
        }
        let result = try ChildProcess.run([Self.demo, "--duration", "1", "--no-memwarn", "--data-dir", folder])
        #expect(result.status == 1)
        #expect(result.standardError.contains(kind == "symbolic link" ? "is a symbolic link" : "is writable by other users"), "\(result.standardError)")
        #expect(scratch.sentinelIsIntact)
    }

    @Test func theDemosOwnFolderIsFreshAndPrivateAndRemovedAfterwards() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let result = try await ChildProcess.runOffThePool([Self.demo, "--duration", "1", "--no-memwarn"], environment: ["TMPDIR=\(scratch.directory)"])
        #expect(result.status == 0, "\(result.standardError)")
        let left = try FileManager.default.contentsOfDirectory(atPath: scratch.directory).filter { $0.hasPrefix("memwarn-demo") }
        #expect(left.isEmpty, "the demo removed its folder: \(left)")
    }
}
