#if canImport(Glibc)
import Glibc
#endif

/// CPU time of threads — this process's or a child's —, found by name in `/proc/PID/task`.
enum ThreadCPU {
    /// The id of this process's thread named `name` (`/proc/self/task/<tid>/comm`, set with
    /// `pthread_setname_np`), or `nil` when there is none.
    static func thread(named name: String) -> Int32? {
        threads(named: name).first
    }

    /// The ids of the threads named `name` of process `pid` (this one by default), ascending.
    static func threads(named name: String, in pid: Int32? = nil) -> [Int32] {
        let process = pid.map(String.init) ?? "self"
        guard let directory = opendir("/proc/\(process)/task") else { return [] }
        defer { closedir(directory) }
        var found: [Int32] = []
        while let entry = readdir(directory) {
            let entryName = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            guard let tid = Int32(entryName) else { continue }
            if readSmallFile("/proc/\(process)/task/\(tid)/comm")?.trimmingNewline == name { found.append(tid) }
        }
        return found.sorted()
    }

    /// A thread's time on a CPU in nanoseconds (the first field of `/proc/PID/task/TID/schedstat`,
    /// the scheduler's own account), for a thread of any process this one may read.
    static func scheduledNanoseconds(pid: Int32, tid: Int32) -> UInt64? {
        guard let text = readSmallFile("/proc/\(pid)/task/\(tid)/schedstat"), let first = text.split(separator: " ").first else { return nil }
        return UInt64(first)
    }

    /// A thread's context switches, as ``contextSwitches(tid:)``, for a thread of process `pid`.
    static func contextSwitches(pid: Int32, tid: Int32) -> UInt64? {
        contextSwitches(statusPath: "/proc/\(pid)/task/\(tid)/status")
    }

    /// The thread's CPU time (user + system) in nanoseconds, from its per-thread CPU clock
    /// (the kernel's `MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED)`), or `nil` when it is gone.
    static func nanoseconds(tid: Int32) -> UInt64? {
        let clock = clockid_t((~tid) &<< 3 | 6)
        var time = timespec()
        guard clock_gettime(clock, &time) == 0 else { return nil }
        return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
    }

    /// The thread's `utime + stime` from `/proc/self/task/<tid>/stat`, in clock ticks.
    static func statTicks(tid: Int32) -> UInt64? {
        guard let stat = readSmallFile("/proc/self/task/\(tid)/stat"),
              let close = stat.lastIndex(of: ")") else { return nil }
        // After "pid (comm)": state is field 3, utime field 14, stime field 15.
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 12, let user = UInt64(fields[11]), let system = UInt64(fields[12]) else { return nil }
        return user + system
    }

    /// The thread's context switches (`voluntary_ctxt_switches + nonvoluntary_ctxt_switches` of
    /// `/proc/self/task/<tid>/status`): about one a wake-up for a thread that sleeps between wake-ups.
    static func contextSwitches(tid: Int32) -> UInt64? {
        contextSwitches(statusPath: "/proc/self/task/\(tid)/status")
    }

    private static func contextSwitches(statusPath: String) -> UInt64? {
        guard let status = readSmallFile(statusPath) else { return nil }
        var total: UInt64 = 0
        var found = 0
        for line in status.split(separator: "\n") where line.hasPrefix("voluntary_ctxt_switches:") || line.hasPrefix("nonvoluntary_ctxt_switches:") {
            guard let value = line.split(separator: ":").last.flatMap({ UInt64($0.trimmingPrefix(while: { $0 == " " || $0 == "\t" })) }) else { return nil }
            total += value
            found += 1
        }
        return found == 2 ? total : nil
    }

    /// Clock ticks a second (`_SC_CLK_TCK`).
    static let ticksPerSecond = UInt64(sysconf(Int32(_SC_CLK_TCK)))

    /// The whole process's CPU time (user + system) in nanoseconds, from `getrusage(RUSAGE_SELF)`.
    static func processNanoseconds() -> UInt64 {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        func ns(_ time: timeval) -> UInt64 { UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_usec) * 1_000 }
        return ns(usage.ru_utime) + ns(usage.ru_stime)
    }
}

/// Names the calling thread (its `comm`, at most 15 bytes), as `pthread_setname_np` would:
/// Glibc's Swift module does not export that call.
func nameCurrentThread(_ name: String) {
    let fd = open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC)
    guard fd >= 0 else { return }
    defer { close(fd) }
    let bytes = Array(name.utf8.prefix(15))
    _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
}

/// The text of a small kernel file, or `nil` when it cannot be read.
func readSmallFile(_ path: String) -> String? {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var buffer = [UInt8](repeating: 0, count: 4096)
    let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
    guard count >= 0 else { return nil }
    return String(decoding: buffer[0..<count], as: UTF8.self)
}

extension String {
    var trimmingNewline: String { hasSuffix("\n") ? String(dropLast()) : self }
}
