#if canImport(Glibc)
import Glibc
#endif

/// Where programs are: a command name looked up as `execvp` would, and the running program's
/// own folder, where SwiftPM puts its sibling products (and the test runners).
package enum ExecutablePath {
    /// The file a command name runs: a name with a slash is used as it is; a bare name is
    /// looked up in each directory of `path` (a `PATH` value; `nil` uses `/usr/local/bin:/usr/bin:/bin`).
    ///
    /// - Returns: the path, or `nil` when no executable regular file is found.
    package static func resolve(_ command: String, path: String?) -> String? {
        if command.contains("/") { return isExecutableFile(command) ? command : nil }
        let directories = (path ?? "/usr/local/bin:/usr/bin:/bin").split(separator: ":", omittingEmptySubsequences: false)
        for directory in directories {
            let candidate = (directory.isEmpty ? "." : String(directory)) + "/" + command
            if isExecutableFile(candidate) { return candidate }
        }
        return nil
    }

    /// A regular file this process may execute (a directory has the x bit too, but cannot be run).
    package static func isExecutableFile(_ path: String) -> Bool {
        FileType.at(path) == .regular && FileSystem.isExecutable(path)
    }

    /// The running program's path (`/proc/self/exe`), or `nil` when it cannot be read.
    package static var running: String? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        guard count > 0 else { return nil }
        return String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The folder of the running program: where SwiftPM puts a product's siblings (and the test
    /// runner beside the products it tests); `.` when `/proc/self/exe` cannot be read.
    package static var productsDirectory: String {
        guard let running, let slash = running.lastIndex(of: "/") else { return "." }
        return String(running[..<slash])
    }

    /// A sibling product of the running program, such as `memwarn-hog`.
    package static func sibling(_ name: String) -> String { productsDirectory + "/" + name }
}
