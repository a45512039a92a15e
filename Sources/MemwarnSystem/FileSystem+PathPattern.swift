#if canImport(Glibc)
import Glibc
#endif

extension FileSystem {
    /// The paths a shell pattern matches (`glob`: `*`, `?` and `[…]` in any component), sorted;
    /// empty when none does or the pattern cannot be matched.
    ///
    /// - Parameter pattern: the pattern, such as `/run/memwarn/pods/*/memwarn`.
    /// - Returns: the paths that exist and match.
    package static func paths(matching pattern: String) -> [String] {
        var matches = glob_t()
        defer { globfree(&matches) }
        guard glob(pattern, 0, nil, &matches) == 0 else { return [] }
        return (0..<Int(matches.gl_pathc)).compactMap { index in matches.gl_pathv[index].map { String(cString: $0) } }
    }
}

extension FileSystem {
    /// Whether a file name matches a shell pattern's component (`fnmatch`: `*`, `?`, `[…]`).
    ///
    /// - Parameters:
    ///   - name: a file name, without a slash.
    ///   - pattern: one component of a pattern, such as `*` or `memwarn`.
    /// - Returns: whether it matches.
    package static func name(_ name: String, matches pattern: String) -> Bool {
        fnmatch(pattern, name, 0) == 0
    }
}
