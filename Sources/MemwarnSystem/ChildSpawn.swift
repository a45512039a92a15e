import CLinuxCalls

#if canImport(Glibc)
import Glibc
#endif

/// What a child process is started with: its program, arguments and environment, the cgroup it
/// joins before its first instruction, and its standard streams.
package struct ChildSpawn {
    /// The program's path (a name without a slash is not looked up: see ``ExecutablePath``).
    package var executable: String
    /// Its arguments, the program's name first.
    package var arguments: [String]
    /// Its environment as `NAME=value` entries.
    package var environment: [String]
    /// The cgroup it joins between fork and exec: the path of its `cgroup.procs`.
    package var cgroupProcsFile: String?
    /// Its standard input, output and error: descriptors this process keeps open until the
    /// spawn returns, or `nil` to inherit this process's.
    package var standardInput: Int32?
    package var standardOutput: Int32?
    package var standardError: Int32?
    /// The signal it gets when the thread that spawned it ends (`PR_SET_PDEATHSIG`), or 0.
    package var parentDeathSignal: Int32 = 0
    /// Whether it leads a new process group (its pid is the group's id): then
    /// ``WaitedChild/signalGroup(_:)`` reaches it and everything it started.
    package var newProcessGroup = false
    /// Whether every descriptor above 2 is closed before exec, also those this process inherited
    /// open across exec (a test harness's, say). `false`: they pass through, as `env` or
    /// `timeout` pass them (a service started with sockets by systemd needs its descriptor 3 on).
    package var closesInheritedDescriptors = false

    /// - Parameters:
    ///   - arguments: the program's path, then its arguments.
    ///   - environment: its environment; `nil` passes this process's.
    package init(_ arguments: [String], environment: [String]? = nil) {
        executable = arguments.first ?? ""
        self.arguments = arguments
        self.environment = environment ?? Self.currentEnvironment
    }

    /// This process's environment as `NAME=value` entries.
    package static var currentEnvironment: [String] {
        var entries: [String] = []
        var entry = environ
        while let pointer = entry.pointee {
            entries.append(String(cString: pointer))
            entry += 1
        }
        return entries
    }

    /// Forks and execs the child.
    ///
    /// The child exits 126 when it cannot join the cgroup or set its streams up, and 127 when
    /// the program cannot be executed: the command's failures are its exit status. What this
    /// throws is this process's own failure, before there was a child to blame (out of file
    /// descriptors opening `cgroup.procs`, out of memory or processes in `fork`). With a
    /// ``parentDeathSignal``, call it from a thread that lives until the child is reaped
    /// (``WaitedChild``).
    ///
    /// - Returns: the child's pid.
    /// - Throws: ``SystemError`` from opening `cgroup.procs` (call `open`, naming the file: `EMFILE`
    ///   when this process is out of descriptors) or from `fork` (naming the program).
    package func start() throws(SystemError) -> Int32 {
        let pid: Int32
        if let cgroupProcsFile {
            let procs = try FileDescriptor.open(cgroupProcsFile, O_WRONLY)
            pid = fork(joining: procs.rawValue)
        } else {
            pid = fork(joining: -1)
        }
        guard pid > 0 else { throw SystemError("fork", errno: -pid, path: executable) }
        return pid
    }

    /// Forks and execs, the child joining the cgroup whose `cgroup.procs` is open as `procs`
    /// (-1: none); the pid, or -errno.
    private func fork(joining procs: Int32) -> Int32 {
        let argv = arguments.map { strdup($0) } + [nil]
        let envp = environment.map { strdup($0) } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        return argv.withUnsafeBufferPointer { argv in
            envp.withUnsafeBufferPointer { envp in
                memwarn_spawn(
                    executable, argv.baseAddress, envp.baseAddress, procs,
                    standardInput ?? -1, standardOutput ?? -1, standardError ?? -1, parentDeathSignal, newProcessGroup ? 1 : 0,
                    closesInheritedDescriptors ? 1 : 0)
            }
        }
    }
}
