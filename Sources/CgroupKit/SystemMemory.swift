/// The whole machine's memory, from `/proc/meminfo`: what memwarn measures against when no
/// cgroup sets a limit.
public struct SystemMemory: Sendable, Hashable, Codable {
    /// `MemTotal`, in bytes.
    public var totalBytes: UInt64
    /// `MemAvailable`, in bytes: the kernel's estimate of what can be allocated without swapping.
    public var availableBytes: UInt64

    /// Memory in use by the system: total less available.
    public var usedBytes: UInt64 { totalBytes - min(availableBytes, totalBytes) }

    /// Creates a reading.
    ///
    /// - Parameters:
    ///   - totalBytes: `MemTotal`, in bytes.
    ///   - availableBytes: `MemAvailable`, in bytes.
    package init(totalBytes: UInt64, availableBytes: UInt64) {
        self.totalBytes = totalBytes
        self.availableBytes = availableBytes
    }

    /// Parses `/proc/meminfo` (`Name:   value kB` lines); only `MemTotal` and `MemAvailable`
    /// are required.
    ///
    /// - Parameters:
    ///   - text: the content of `/proc/meminfo`.
    ///   - path: the file's path, for error messages.
    /// - Returns: the reading, in bytes.
    /// - Throws: `CgroupError` `.malformed` when either is missing or not a number.
    package static func parse(_ text: String, path: String) throws(CgroupError) -> SystemMemory {
        var total: UInt64?
        var available: UInt64?
        for line in text.split(separator: "\n") {
            let isTotal = line.hasPrefix("MemTotal:")
            guard isTotal || line.hasPrefix("MemAvailable:") else { continue }
            let fields = line.split(separator: " ")
            guard fields.count >= 2, let kibibytes = UInt64(fields[1]) else {
                throw CgroupError(.malformed, "bad line \"\(CgroupValues.preview(line))\"", path: path)
            }
            let (bytes, overflow) = kibibytes.multipliedReportingOverflow(by: fields.count == 3 && fields[2] == "kB" ? 1024 : 1)
            guard !overflow else { throw CgroupError(.malformed, "value out of range in \"\(CgroupValues.preview(line))\"", path: path) }
            if isTotal { total = bytes } else { available = bytes }
        }
        guard let total, let available else {
            throw CgroupError(.malformed, "MemTotal or MemAvailable missing", path: path)
        }
        return SystemMemory(totalBytes: total, availableBytes: available)
    }
}
