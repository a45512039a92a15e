/// One line of `/proc/PID/cgroup`: a hierarchy and the process's cgroup in it.
package struct CgroupMembership: Sendable, Hashable {
    /// The hierarchy ID; `0` is the cgroup2 (unified) hierarchy.
    package var hierarchyID: Int
    /// The controllers bound to the hierarchy (`["memory"]`, `["cpu", "cpuacct"]`,
    /// `["name=systemd"]`); empty for cgroup2.
    package var controllers: [String]
    /// The cgroup's path relative to the reader's cgroup-namespace root. It starts with
    /// `/..` when the cgroup lies outside that namespace.
    package var path: String

    /// Whether this is the cgroup2 line (`0::/path`).
    package var isUnified: Bool { hierarchyID == 0 && controllers.isEmpty }

    /// Creates a membership.
    ///
    /// - Parameters:
    ///   - hierarchyID: the hierarchy ID; `0` for cgroup2.
    ///   - controllers: the controllers bound to the hierarchy; empty for cgroup2.
    ///   - path: the cgroup's path relative to the cgroup-namespace root.
    package init(hierarchyID: Int, controllers: [String], path: String) {
        self.hierarchyID = hierarchyID
        self.controllers = controllers
        self.path = path
    }

    /// Parses `/proc/PID/cgroup`: `ID:controllers:path` lines. A path may itself hold `:`.
    ///
    /// - Parameters:
    ///   - text: the content of `/proc/PID/cgroup`.
    ///   - path: the file's path, for error messages.
    /// - Returns: one membership a line, in the file's order.
    /// - Throws: `CgroupError` `.malformed` for a line with too few fields, a bad ID or a
    ///   path that is not absolute, and for a file with no lines.
    package static func parse(_ text: String, path: String) throws(CgroupError) -> [CgroupMembership] {
        var memberships: [CgroupMembership] = []
        for line in text.split(separator: "\n") where !line.isEmpty {
            let fields = line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
            guard fields.count == 3, let id = Int(fields[0]), id >= 0, fields[2].hasPrefix("/") else {
                throw CgroupError(.malformed, "line \"\(CgroupValues.preview(line))\" is not ID:controllers:/path", path: path)
            }
            let controllers = fields[1].isEmpty ? [] : fields[1].split(separator: ",").map(String.init)
            memberships.append(CgroupMembership(hierarchyID: id, controllers: controllers, path: String(fields[2])))
        }
        guard !memberships.isEmpty else { throw CgroupError(.malformed, "empty", path: path) }
        return memberships
    }
}
