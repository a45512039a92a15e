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
