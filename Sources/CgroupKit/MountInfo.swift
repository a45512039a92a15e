/// One line of `/proc/PID/mountinfo` (see `proc(5)`).
package struct MountEntry: Sendable, Hashable {
    /// The mount's root within its filesystem, relative to the reader's cgroup-namespace
    /// root for cgroup filesystems: `/`, `/docker/abc`, or `/../..` when the mount shows
    /// cgroups above the namespace root.
    package var root: String
    /// Where it is mounted.
    package var mountPoint: String
    /// The filesystem type: `cgroup`, `cgroup2`, `tmpfs`, ….
    package var fileSystemType: String
    /// The per-superblock options; for cgroup v1 they name the controllers (`rw,memory`).
    package var superOptions: [String]

    /// Creates an entry.
    ///
    /// - Parameters:
    ///   - root: the mount's root within its filesystem.
    ///   - mountPoint: where it is mounted.
    ///   - fileSystemType: the filesystem type, such as `cgroup2`.
    ///   - superOptions: the per-superblock options.
    package init(root: String, mountPoint: String, fileSystemType: String, superOptions: [String]) {
        self.root = root
        self.mountPoint = mountPoint
        self.fileSystemType = fileSystemType
        self.superOptions = superOptions
    }

    /// Parses `mountinfo`. Octal escapes in paths (`\040` for a space) are decoded.
    ///
    /// - Parameters:
    ///   - text: the content of a `mountinfo` file.
    ///   - path: the file's path, for error messages.
    /// - Returns: every mount, in the file's order.
    /// - Throws: `CgroupError` `.malformed` for a line without the ` - ` separator or with
    ///   too few fields, and for a file with no lines.
    package static func parse(_ text: String, path: String) throws(CgroupError) -> [MountEntry] {
        var entries: [MountEntry] = []
        for line in text.split(separator: "\n") where !line.isEmpty {
            let fields = line.split(separator: " ")
            guard let separator = fields.firstIndex(of: "-"), separator >= 6, fields.count >= separator + 4 else {
                throw CgroupError(.malformed, "line \"\(CgroupValues.preview(line))\" is not a mountinfo entry", path: path)
            }
            entries.append(
                MountEntry(
                    root: unescape(fields[3]),
                    mountPoint: unescape(fields[4]),
                    fileSystemType: String(fields[separator + 1]),
                    superOptions: fields[separator + 3].split(separator: ",").map(String.init)))
        }
        guard !entries.isEmpty else { throw CgroupError(.malformed, "empty", path: path) }
        return entries
    }

    /// Decodes the kernel's `\ooo` escapes for space, tab, newline and backslash.
    static func unescape(_ field: Substring) -> String {
        guard field.contains("\\") else { return String(field) }
        var bytes: [UInt8] = []
        let utf8 = Array(field.utf8)
        var index = 0
        while index < utf8.count {
            if utf8[index] == UInt8(ascii: "\\"), index + 3 < utf8.count,
                let value = UInt8(String(decoding: utf8[(index + 1)...(index + 3)], as: UTF8.self), radix: 8)
            {
                bytes.append(value)
                index += 4
            } else {
                bytes.append(utf8[index])
                index += 1
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
