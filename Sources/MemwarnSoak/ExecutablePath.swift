import Foundation

/// Finds the file a command name runs, as `execvp` would: a name with a slash is used as it
/// is; a bare name is looked up in each directory of `PATH`.
enum ExecutablePath {
    static func resolve(_ command: String, path: String?) -> String? {
        if command.contains("/") { return isExecutableFile(command) ? command : nil }
        let directories = (path ?? "/usr/local/bin:/usr/bin:/bin").split(separator: ":", omittingEmptySubsequences: false)
        for directory in directories {
            let candidate = (directory.isEmpty ? "." : String(directory)) + "/" + command
            if isExecutableFile(candidate) { return candidate }
        }
        return nil
    }

    /// A regular file this process may execute (a directory has the x bit too, but cannot be run).
    private static func isExecutableFile(_ path: String) -> Bool {
        var status = stat()
        return stat(path, &status) == 0 && status.st_mode & S_IFMT == S_IFREG && access(path, X_OK) == 0
    }
}
