import CLibcgroup
import MemwarnSystem

#if canImport(Glibc)
import Glibc
#endif

/// The calls memwarn makes into libcgroup (Debian's `libcgroup-dev`, version 2.0.2).
///
/// libcgroup keeps global state, so every call runs under one lock, and `cgroup_init` runs
/// once. libcgroup 2.0.2 works on cgroup v1 hierarchies only for the calls used here: it
/// cannot name cgroup2 paths (see `LINUX-SIGNALS.md`).
package enum Libcgroup {
    private static let lock = Locked<Bool>(false)

    /// Runs `body` under the library lock, after `cgroup_init` has succeeded once.
    private static func withLibrary<T>(_ body: () throws(CgroupError) -> T) throws(CgroupError) -> T {
        try lock.withLock { (initialized: inout Bool) throws(CgroupError) -> T in
            if !initialized {
                let status = cgroup_init()
                let callErrno = Glibc.errno
                guard status == 0 else { throw error(status, "cgroup_init", callErrno: callErrno) }
                initialized = true
            }
            return try body()
        }
    }

    /// The text for a libcgroup status code. `cgroup_strerror` in 2.0.2 is off by one for
    /// codes from `ECGEOF` (50023) on, because its table has no entry for the unused 50022.
    ///
    /// - Parameters:
    ///   - status: a status code a libcgroup call returned, such as 50007.
    ///   - callErrno: for `ECGOTHER`, the `errno` the call left, used when libcgroup recorded none.
    /// - Returns: the text; for `ECGOTHER`, the text of the `errno` libcgroup recorded, or else of
    ///   `callErrno`, or else that libcgroup gave no reason (never "Success").
    package static func message(for status: Int32, callErrno: Int32 = 0) -> String {
        if status == Int32(ECGOTHER) {
            let recorded = otherErrno(callErrno: callErrno)
            return recorded == 0 ? "libcgroup gave no reason" : String(cString: strerror(recorded))
        }
        let corrected = status >= Int32(ECGEOF) ? status - 1 : status
        return cgroup_strerror(corrected).map { String(cString: $0) } ?? "unknown libcgroup error"
    }

    /// The `errno` behind an `ECGOTHER`: the one libcgroup recorded, or else the one its call left.
    /// (`cgroup_init` in 2.0.2 fails with `ECGOTHER` and records none when it cannot open
    /// `/proc/self/mountinfo`, as when descriptors run out.)
    private static func otherErrno(callErrno: Int32) -> Int32 {
        let recorded = cgroup_get_last_errno()
        return recorded != 0 ? recorded : callErrno
    }

    /// The error for a libcgroup call that returned `status`, thrown where the caller is
    /// (`file` and `line`: the caller's by default, as `CgroupError` records them).
    static func error(
        _ status: Int32, _ call: String, path: String? = nil, callErrno: Int32 = 0, file: String = #fileID, line: Int = #line
    ) -> CgroupError {
        let lastErrno = status == Int32(ECGOTHER) ? otherErrno(callErrno: callErrno) : 0
        let code: CgroupError.Code =
            switch lastErrno {
            case EACCES, EPERM: .permissionDenied
            case ENOENT: .notFound
            default: status == Int32(ECGROUPNOTEXIST) ? .notFound : .libcgroup
            }
        return CgroupError(
            code, "\(call) failed: \(message(for: status, callErrno: callErrno)) (libcgroup \(status))", path: path, errno: lastErrno == 0 ? nil : lastErrno,
            file: file, line: line)
    }

    /// The path of a process's cgroup in a v1 controller's hierarchy, as libcgroup resolves it.
    ///
    /// - Parameters:
    ///   - pid: the process.
    ///   - controller: a v1 controller name, such as `memory`.
    /// - Returns: the path relative to the hierarchy's root, starting with `/`.
    /// - Throws: `CgroupError` `.libcgroup` when libcgroup cannot resolve it.
    package static func currentPath(pid: Int32, controller: String) throws(CgroupError) -> String {
        try withLibrary { () throws(CgroupError) -> String in
            var raw: UnsafeMutablePointer<CChar>?
            let status = cgroup_get_current_controller_path(pid, controller, &raw)
            guard status == 0, let raw else { throw error(status, "cgroup_get_current_controller_path(\(pid), \(controller))") }
            defer { free(raw) }
            let path = String(cString: raw)
            return path.hasPrefix("/") ? path : "/" + path
        }
    }

    /// Where libcgroup sees a v1 controller mounted.
    ///
    /// - Parameter controller: a v1 controller name, such as `memory`.
    /// - Returns: the hierarchy's mount point, such as `/sys/fs/cgroup/memory`.
    /// - Throws: `CgroupError` when libcgroup cannot find it (no such v1 hierarchy).
    package static func mountPoint(controller: String) throws(CgroupError) -> String {
        try withLibrary { () throws(CgroupError) -> String in
            var raw: UnsafeMutablePointer<CChar>?
            let status = cgroup_get_subsys_mount_point(controller, &raw)
            guard status == 0, let raw else { throw error(status, "cgroup_get_subsys_mount_point(\(controller))") }
            defer { free(raw) }
            return String(cString: raw)
        }
    }

    /// Creates a cgroup in a v1 controller's hierarchy and sets values on it
    /// (`cgroup_new_cgroup`, `cgroup_add_controller`, `cgroup_add_value_uint64`,
    /// `cgroup_create_cgroup`).
    ///
    /// - Parameters:
    ///   - path: the new cgroup's path relative to the hierarchy's root.
    ///   - controller: the controller, such as `memory`.
    ///   - values: control files and their values, such as `memory.limit_in_bytes`.
    /// - Throws: `CgroupError` when libcgroup fails; nothing is left behind then.
    package static func createCgroup(path: String, controller: String, values: [(String, UInt64)]) throws(CgroupError) {
        try withGroup(path: path, controller: controller) { (group, handle) throws(CgroupError) in
            try add(values, to: handle, path: path)
            let status = cgroup_create_cgroup(group, 0)
            guard status == 0 else {
                _ = cgroup_delete_cgroup(group, 0)
                throw error(status, "cgroup_create_cgroup", path: path)
            }
        }
    }

    /// Sets a value on an existing v1 cgroup (`cgroup_set_value_uint64` + `cgroup_modify_cgroup`).
    ///
    /// - Parameters:
    ///   - value: the value to write.
    ///   - file: the control file, such as `memory.limit_in_bytes`.
    ///   - path: the cgroup's path relative to the hierarchy's root.
    ///   - controller: the controller, such as `memory`.
    /// - Throws: `CgroupError` when libcgroup fails.
    package static func setValue(_ value: UInt64, file: String, path: String, controller: String) throws(CgroupError) {
        try withGroup(path: path, controller: controller) { (group, handle) throws(CgroupError) in
            try add([(file, value)], to: handle, path: path)
            let status = cgroup_modify_cgroup(group)
            guard status == 0 else { throw error(status, "cgroup_modify_cgroup(\(file))", path: path) }
        }
    }

    /// Deletes an empty v1 cgroup (`cgroup_delete_cgroup`).
    ///
    /// - Parameters:
    ///   - path: the cgroup's path relative to the hierarchy's root.
    ///   - controller: the controller, such as `memory`.
    /// - Throws: `CgroupError` when libcgroup fails (for example while processes remain).
    package static func deleteCgroup(path: String, controller: String) throws(CgroupError) {
        try withGroup(path: path, controller: controller) { (group, _) throws(CgroupError) in
            let status = cgroup_delete_cgroup(group, 0)
            guard status == 0 else { throw error(status, "cgroup_delete_cgroup", path: path) }
        }
    }

    /// Runs `body` with a libcgroup description of one cgroup and its controller, under the
    /// library lock, and frees the description afterwards.
    private static func withGroup(
        path: String, controller: String,
        _ body: (OpaquePointer, OpaquePointer) throws(CgroupError) -> Void
    ) throws(CgroupError) {
        try withLibrary { () throws(CgroupError) in
            guard let group = cgroup_new_cgroup(trimmedName(path)) else { throw CgroupError(.libcgroup, "cgroup_new_cgroup failed", path: path) }
            var owned: OpaquePointer? = group
            defer { cgroup_free(&owned) }
            guard let handle = cgroup_add_controller(group, controller) else {
                throw CgroupError(.libcgroup, "cgroup_add_controller(\(controller)) failed", path: path)
            }
            try body(group, handle)
        }
    }

    private static func add(_ values: [(String, UInt64)], to handle: OpaquePointer, path: String) throws(CgroupError) {
        for (file, value) in values {
            let status = cgroup_add_value_uint64(handle, file, value)
            guard status == 0 else { throw error(status, "cgroup_add_value_uint64(\(file))", path: path) }
        }
    }

    private static func trimmedName(_ path: String) -> String {
        String(path.drop { $0 == "/" })
    }
}
