import Foundation

/// Finds the file a command name runs, as `execvp` would: a name with a slash is used as it
/// is; a bare name is looked up in each directory of `PATH`.
enum ExecutablePath {
    static func resolve(_ command: String, path: String?) -> String? {
        if command.contains("/") { return access(command, X_OK) == 0 ? command : nil }
        let directories = (path ?? "/usr/local/bin:/usr/bin:/bin").split(separator: ":", omittingEmptySubsequences: false)
        for directory in directories {
            let candidate = (directory.isEmpty ? "." : String(directory)) + "/" + command
            var status = stat()
            if stat(candidate, &status) == 0, (status.st_mode & S_IFMT) == S_IFREG, access(candidate, X_OK) == 0 { return candidate }
        }
        return nil
    }
}
