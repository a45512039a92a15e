import Foundation
import MemwarnSystem
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The system layer's file and process wrappers on real files: what the control endpoint's and
/// the cleanup's security checks rely on (links not followed, an entry looked at and removed
/// relative to a held directory, a process that exists but is another user's).
@Suite struct FileSystemWrapperTests {
    /// A fresh private directory, removed after `body`.
    func withDirectory(_ body: (String) throws -> Void) throws {
        let directory = try FileSystem.makeUniqueDirectory(template: NSTemporaryDirectory() + "memwarn-fs-test-XXXXXX")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try body(directory)
    }

    @Test func aLinkIsSeenAsALinkOnlyWhenNotFollowed() throws {
        try withDirectory { directory in
            let target = directory + "/target"
            let link = directory + "/link"
            _ = FileManager.default.createFile(atPath: target, contents: Data("x".utf8))
            try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: target)
            #expect(try FileStatus.at(link, followingLinks: false).type == .symbolicLink)
            #expect(try FileStatus.at(link).type == .regular)
            #expect(try FileStatus.at(link).inode == FileStatus.at(target).inode)
            #expect(FileType.at(link, followingLinks: false) == .symbolicLink)
            #expect(FileType.at(directory) == .directory)
        }
    }

    @Test func aSocketAndAFIFOAreTold() throws {
        try withDirectory { directory in
            let fifo = directory + "/fifo"
            #expect(mkfifo(fifo, 0o600) == 0)
            #expect(FileType.at(fifo) == .fifo)
            let socket = try FileDescriptor.unixStreamSocket(nonBlocking: false)
            try socket.bind(to: try UnixSocketAddress(path: directory + "/s.sock"))
            #expect(FileType.at(directory + "/s.sock", followingLinks: false) == .socket)
            let names = try FileSystem.entries(of: directory).map(\.name).sorted()
            #expect(names == ["fifo", "s.sock"], "no . or ..: \(names)")
        }
    }

    @Test func anEntryIsExaminedAndRemovedRelativeToTheHeldDirectory() throws {
        try withDirectory { directory in
            _ = FileManager.default.createFile(atPath: directory + "/file", contents: Data())
            try FileManager.default.createSymbolicLink(atPath: directory + "/link", withDestinationPath: "/etc/passwd")
            let held = try FileDescriptor.open(directory, O_RDONLY | O_DIRECTORY | O_NOFOLLOW)
            #expect(try held.status().type == .directory)
            #expect(try held.status().owner == geteuid())
            #expect(try held.status(ofEntry: "link", followingLinks: false).type == .symbolicLink)
            try held.removeEntry("link")
            #expect(!FileManager.default.fileExists(atPath: directory + "/link"))
            #expect(FileManager.default.fileExists(atPath: "/etc/passwd"), "the link went, not what it named")
            let missing = #expect(throws: SystemError.self) { try held.status(ofEntry: "link", followingLinks: false) }
            #expect(missing?.errno == ENOENT)
            // Opening a link with O_NOFOLLOW is refused: a directory swapped for a link is not entered.
            try FileManager.default.createSymbolicLink(atPath: directory + "/elsewhere", withDestinationPath: "/tmp")
            let refused = #expect(throws: SystemError.self) { _ = try FileDescriptor.open(directory + "/elsewhere", O_RDONLY | O_DIRECTORY | O_NOFOLLOW) }
            #expect(refused?.errno == ELOOP || refused?.errno == ENOTDIR, "\(String(describing: refused))")
        }
    }

    @Test func directoriesAreMadeAndRemovedWithTheirErrno() throws {
        try withDirectory { directory in
            try FileSystem.makeDirectory(directory + "/d", mode: 0o700)
            // The mode asked for, less what the umask takes (it can only take bits): no group or
            // other bit appears. (Reading the umask would set it, under tests running beside.)
            #expect(try FileStatus.at(directory + "/d").permissions & 0o077 == 0)
            let twice = #expect(throws: SystemError.self) { try FileSystem.makeDirectory(directory + "/d", mode: 0o700) }
            #expect(twice?.errno == EEXIST)
            _ = FileManager.default.createFile(atPath: directory + "/d/f", contents: Data())
            let notEmpty = #expect(throws: SystemError.self) { try FileSystem.removeDirectory(directory + "/d") }
            #expect(notEmpty?.errno == ENOTEMPTY || notEmpty?.errno == EEXIST)
            try FileSystem.removeFile(directory + "/d/f")
            try FileSystem.removeDirectory(directory + "/d")
            #expect(!FileSystem.exists(directory + "/d"))
        }
    }

    /// A file written for an operator (the agent's
    /// metrics, the soak's samples) must never be written through a link another account planted
    /// at its name or at a temporary name beside it.
    @Test func aReplacedFileNeverWritesThroughALinkAtItsNameOrBesideIt() throws {
        try withDirectory { directory in
            let victim = directory + "/victim"
            _ = FileManager.default.createFile(atPath: victim, contents: Data("root's".utf8))
            let file = directory + "/metrics.prom"
            for planted in [file, file + ".tmp"] {
                try FileManager.default.createSymbolicLink(atPath: planted, withDestinationPath: victim)
            }
            try FileSystem.replaceFile(file, with: Array("first\n".utf8))
            try FileSystem.replaceFile(file, with: Array("second\n".utf8), mode: 0o600)
            #expect(try String(contentsOfFile: victim, encoding: .utf8) == "root's", "what the links name is untouched")
            #expect(try FileStatus.at(file, followingLinks: false).type == .regular, "the link at the name was replaced")
            #expect(try String(contentsOfFile: file, encoding: .utf8) == "second\n")
            #expect(try FileStatus.at(file).permissions & 0o077 == 0, "the mode asked for")
            #expect(try FileStatus.at(file + ".tmp", followingLinks: false).type == .symbolicLink, "a guessable name is never used")
            let names = try FileSystem.entries(of: directory).map(\.name).sorted()
            #expect(names == ["metrics.prom", "metrics.prom.tmp", "victim"], "no temporary file left: \(names)")
        }
    }

    @Test func aFileThatCannotBeReplacedSaysWhyAndLeavesNothing() throws {
        try withDirectory { directory in
            let missing = #expect(throws: SystemError.self) { try FileSystem.replaceFile(directory + "/no-such-folder/f", with: [1]) }
            #expect(missing?.errno == ENOENT && missing?.path == directory + "/no-such-folder", "\(String(describing: missing))")
            try FileSystem.makeDirectory(directory + "/taken", mode: 0o700)
            let overDirectory = #expect(throws: SystemError.self) { try FileSystem.replaceFile(directory + "/taken", with: [1]) }
            #expect(overDirectory?.errno == EISDIR && overDirectory?.path == directory + "/taken", "\(String(describing: overDirectory))")
            let noName = #expect(throws: SystemError.self) { try FileSystem.replaceFile(directory + "/", with: [1]) }
            #expect(noName?.errno == EISDIR)
            #expect(try FileSystem.entries(of: directory).map(\.name) == ["taken"], "no temporary file left")
        }
    }

    @Test func aProcessExistsUnlessTheKernelSaysNoSuchProcess() throws {
        #expect(Signals.processExists(getpid()))
        #expect(Signals.processExists(1), "init: another user's or not, it exists (EPERM counts as existing)")
        // A pid no process has: the highest free one below pid_max's default.
        let free = try #require((30_000..<32_768).reversed().first { kill(Int32($0), 0) != 0 && errno == ESRCH })
        #expect(!Signals.processExists(Int32(free)))
        let gone = #expect(throws: SystemError.self) { try Signals.send(0, to: Int32(free)) }
        #expect(gone?.errno == ESRCH)
    }
}
