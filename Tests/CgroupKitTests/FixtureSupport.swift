import Foundation
import Testing

@testable import CgroupKit

/// The captured-style trees in `Fixtures/` (see `Fixtures/README.md`).
enum Fixture {
    /// The real directory of a fixture tree, which stands for `/`.
    static func root(_ name: String) -> String {
        Bundle.module.resourceURL!.appendingPathComponent("Fixtures/\(name)").path
    }

    /// Kernel files read below a fixture tree.
    static func files(_ name: String) -> KernelFiles {
        KernelFiles(root: root(name))
    }

    /// Discovery on a fixture tree (never calls libcgroup: the root is not `/`).
    static func discovery(_ name: String) -> CgroupDiscovery {
        CgroupDiscovery(files: files(name))
    }
}

/// A writable tree in a fresh temporary directory, optionally a copy of a fixture tree,
/// for broken variants that are not worth committing. Removed when released.
final class ScratchTree {
    /// The directory that stands for `/`.
    let root: String

    /// Kernel files read below the tree.
    var files: KernelFiles { KernelFiles(root: root) }

    /// Discovery on the tree.
    var discovery: CgroupDiscovery { CgroupDiscovery(files: files) }

    /// A new empty tree, or a copy of the named fixture tree.
    init(copying fixture: String? = nil) throws {
        let base = FileManager.default.temporaryDirectory
            .appendingPathComponent("CgroupKitTests-\(UUID().uuidString)").path
        if let fixture {
            try Self.copy(Fixture.root(fixture), to: base)
        } else {
            try FileManager.default.createDirectory(atPath: base, withIntermediateDirectories: true)
        }
        root = base
    }

    deinit {
        try? FileManager.default.removeItem(atPath: root)
    }

    /// Copies a tree as the running user, owning what it makes: `FileManager.copyItem` keeps the
    /// owner of a symbolic link, which an ordinary user may not (EPERM), so these tests could
    /// not run as one.
    private static func copy(_ source: String, to destination: String) throws {
        let manager = FileManager.default
        try manager.createDirectory(atPath: destination, withIntermediateDirectories: true)
        for name in try manager.contentsOfDirectory(atPath: source) {
            let from = source + "/" + name
            let to = destination + "/" + name
            let type = try manager.attributesOfItem(atPath: from)[.type] as? FileAttributeType
            switch type {
            case .typeSymbolicLink?: try manager.createSymbolicLink(atPath: to, withDestinationPath: manager.destinationOfSymbolicLink(atPath: from))
            case .typeDirectory?: try copy(from, to: to)
            default: try Data(contentsOf: URL(fileURLWithPath: from)).write(to: URL(fileURLWithPath: to))
            }
        }
    }

    /// The real path of a host path inside the tree.
    func path(_ hostPath: String) -> String { root + hostPath }

    /// Writes (creating or replacing) a file at a host path, creating its directories.
    func write(_ hostPath: String, _ text: String) throws {
        try write(hostPath, Data(text.utf8))
    }

    /// Writes raw bytes at a host path, creating its directories.
    func write(_ hostPath: String, _ data: Data) throws {
        let url = URL(fileURLWithPath: path(hostPath))
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try data.write(to: url)
    }

    /// Removes a file or directory at a host path.
    func remove(_ hostPath: String) throws {
        try FileManager.default.removeItem(atPath: path(hostPath))
    }
}

/// The ``CgroupError`` a body throws, or `nil` when it returns.
func caughtError<T>(_ body: () throws(CgroupError) -> T) -> CgroupError? {
    do {
        _ = try body()
        return nil
    } catch {
        return error
    }
}

/// Expects `body` to throw a ``CgroupError`` with `code` whose description names `path`.
@discardableResult
func expectError<T>(
    _ code: CgroupError.Code,
    naming path: String,
    sourceLocation: SourceLocation = #_sourceLocation,
    _ body: () throws(CgroupError) -> T
) -> CgroupError? {
    guard let error = caughtError(body) else {
        Issue.record("expected a \(code) error naming \(path), but nothing was thrown", sourceLocation: sourceLocation)
        return nil
    }
    #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
    #expect(error.path == path, "\(error)", sourceLocation: sourceLocation)
    #expect(error.description.hasPrefix(path + ": "), "\(error)", sourceLocation: sourceLocation)
    return error
}
