import MemwarnSystem

#if canImport(Glibc)
import Glibc
#endif

/// A child memory cgroup this process made, with a limit: what `memwarn run` and the test kit
/// put processes in. On cgroup v1 it is made through libcgroup (`memory.limit_in_bytes`); on
/// cgroup v2 with `mkdir` and by writing `memory.max` and `memory.high` (libcgroup 2.0.2
/// cannot name cgroup2 paths).
package final class MemoryCgroup: Sendable {
    /// Where it is.
    package let location: CgroupLocation
    /// Its hard limit in bytes.
    package let maximumBytes: UInt64
    /// Its throttling limit in bytes (cgroup v2 only).
    package let highBytes: UInt64?

    /// Creates `name` below `parent`, a memory cgroup of the same hierarchy, with its limits.
    ///
    /// - Parameters:
    ///   - parent: the memory cgroup to create it in.
    ///   - name: the new cgroup's directory name; an existing cgroup is never adopted.
    ///   - maximumBytes: the hard limit (`memory.max`, or v1's `memory.limit_in_bytes`).
    ///   - highBytes: the throttling limit (`memory.high`), cgroup v2 only.
    /// - Throws: `CgroupError`: `.unsupported` for `highBytes` on cgroup v1 (it has no
    ///   `memory.high`), `.permissionDenied` (with how to get a cgroup) when this user may not
    ///   create one, or what libcgroup or the kernel said. Nothing is left behind on failure.
    package init(parent: CgroupLocation, name: String, maximumBytes: UInt64, highBytes: UInt64? = nil) throws(CgroupError) {
        let location = parent.child(name)
        do throws(CgroupError) {
            switch parent.version {
            case .v1:
                guard highBytes == nil else {
                    throw CgroupError(
                        .unsupported, "memory.high exists only on cgroup v2; this host's memory controller is on cgroup v1 (use the hard limit alone)")
                }
                // Made here first, exclusively: libcgroup would adopt a directory that exists.
                try Self.makeDirectory(location)
                do throws(CgroupError) {
                    try Libcgroup.createCgroup(path: location.path, controller: "memory", values: [("memory.limit_in_bytes", maximumBytes)])
                } catch {
                    try? FileSystem.removeDirectory(location.directory)
                    throw error
                }
            case .v2:
                try Self.makeDirectory(location)
                do throws(CgroupError) {
                    try KernelFiles.host.write(String(maximumBytes), to: location.file("memory.max"))
                    if let highBytes { try KernelFiles.host.write(String(highBytes), to: location.file("memory.high")) }
                } catch {
                    try? FileSystem.removeDirectory(location.directory)
                    throw error
                }
            }
        } catch  where error.code == .permissionDenied || error.errno == EACCES || error.errno == EPERM {
            throw CgroupError(
                .permissionDenied,
                """
                cannot create the cgroup \(location.directory): \(error.message). Creating cgroups needs root, \
                or a cgroup delegated to your user (for example: systemd-run --user --scope -p Delegate=yes memwarn run ...)
                """, path: location.directory, errno: error.errno)
        }
        self.location = location
        self.maximumBytes = maximumBytes
        self.highBytes = highBytes
    }

    /// Makes the cgroup's directory, exclusively.
    private static func makeDirectory(_ location: CgroupLocation) throws(CgroupError) {
        do {
            try FileSystem.makeDirectory(location.directory, mode: 0o755)
        } catch {
            throw creationError(error.errno, location)
        }
    }

    /// Why `mkdir` of a new cgroup failed: one that exists is never adopted (it may be
    /// someone else's, with their processes and their limit). Thrown where the caller is.
    private static func creationError(_ code: Int32, _ location: CgroupLocation, file: String = #fileID, line: Int = #line) -> CgroupError {
        code == EEXIST
            ? CgroupError(
                .unwritable, "a cgroup of that name already exists; a new one is made, never an existing one adopted",
                path: location.directory, errno: code, file: file, line: line)
            : KernelFiles.openError(code, location.directory, writing: true, file: file, line: line)
    }

    /// Moves a process into the cgroup.
    ///
    /// - Parameter pid: the process.
    /// - Throws: `CgroupError` when `cgroup.procs` cannot be written (no such process, or
    ///   no permission).
    package func add(pid: Int32) throws(CgroupError) {
        try KernelFiles.host.write(String(pid), to: location.file("cgroup.procs"))
    }

    /// The processes in it.
    ///
    /// - Returns: the pids in `cgroup.procs`.
    /// - Throws: `CgroupError` when `cgroup.procs` cannot be read.
    package func processes() throws(CgroupError) -> [Int32] {
        try KernelFiles.host.read(location.file("cgroup.procs")).split(separator: "\n").compactMap { Int32($0) }
    }

    /// A reader for its memory files.
    package var reader: CgroupMemoryReader { CgroupMemoryReader(location: location) }

    /// Removes it, retrying for up to a second while the kernel still holds it busy (a
    /// process that just exited is released a little later).
    ///
    /// - Throws: `CgroupError`, the last failure, when it still exists after a second
    ///   (processes remain in it, say).
    package func remove() throws(CgroupError) {
        var lastError: CgroupError?
        for _ in 0..<50 {
            do throws(CgroupError) {
                switch location.version {
                case .v1: try Libcgroup.deleteCgroup(path: location.path, controller: "memory")
                case .v2:
                    do {
                        try FileSystem.removeDirectory(location.directory)
                    } catch {
                        guard error.errno == ENOENT else { throw KernelFiles.openError(error.errno, location.directory, writing: true) }
                    }
                }
                if !KernelFiles.host.exists(location.directory) { return }
            } catch {
                lastError = error
            }
            SystemThread.sleep(for: .milliseconds(20))
        }
        throw lastError ?? CgroupError(.libcgroup, "the cgroup still exists after deletion", path: location.directory)
    }
}
