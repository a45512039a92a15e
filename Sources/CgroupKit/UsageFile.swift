import MemwarnSystem

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// One usage file held open and read in place: what adaptive sampling reads, up to hundreds of
/// times a second, so a reading is one `pread` at offset 0 into a buffer allocated once, parsed
/// without making a string (no reopen, no allocation per read).
///
/// The kernel generates cgroup and procfs files anew on each read from offset 0, so the same
/// descriptor gives fresh values for as long as the file exists. A cgroup removed under it
/// makes the read fail with `ENODEV`: ``read()`` reports that as `.notFound`.
///
/// Not thread-safe: one owner (the monitor's loop thread) reads it.
package final class UsageFile {
    /// What the file holds.
    package struct Format: Sendable, Hashable, CustomStringConvertible {
        private enum Base: Sendable, Hashable {
            case bytes, meminfo
            case keyed([UInt8])
        }
        private let base: Base

        /// One decimal number of bytes and a newline: cgroup v2 `memory.current`, v1
        /// `memory.usage_in_bytes`.
        package static let bytes = Format(base: .bytes)
        /// `/proc/meminfo`: usage is `MemTotal - MemAvailable` (both in kB, among the first lines).
        package static let meminfo = Format(base: .meminfo)
        /// One line `<key> <bytes>` of a flat keyed file such as `memory.stat`.
        package static func keyed(_ key: String) -> Format { Format(base: .keyed(Array(key.utf8))) }

        package var description: String {
            switch base {
            case .bytes: "bytes"
            case .meminfo: "meminfo"
            case .keyed(let key): "the \(String(decoding: key, as: UTF8.self)) line"
            }
        }

        /// The bytes read at most: a decimal number fits in 21; `MemTotal` and `MemAvailable` are
        /// the first and third lines of `/proc/meminfo` (about 90 bytes); `memory.stat` is under
        /// 1 KiB on cgroup v1 here and about 1.5 KiB on a v2 kernel of 2024, with room to grow.
        var bufferSize: Int {
            if case .keyed = base { return 16 << 10 }
            return 512
        }

        /// The value the bytes read hold, in this format.
        func parse(_ bytes: UnsafeRawBufferPointer, path: String) throws(CgroupError) -> UInt64 {
            switch base {
            case .bytes: try UsageFile.parseBytes(bytes, path: path)
            case .meminfo: try UsageFile.parseMeminfo(bytes, path: path)
            case .keyed(let key): try UsageFile.parseKeyed(key, in: bytes, path: path)
            }
        }
    }

    /// The file, as a host path (for messages and `PressureMonitor.watchedSources`).
    package let hostPath: String
    /// How it is parsed.
    package let format: Format
    private let realPath: String
    private let descriptor: FileDescriptor
    /// Failures forced on its open and reads (tests only; `nil` on a real host).
    private let faultPlan: ReadFaultPlan?
    private let buffer: UnsafeMutableRawBufferPointer

    /// Opens the file.
    ///
    /// - Parameters:
    ///   - hostPath: the file, as a path on the host (`/sys/fs/cgroup/app/memory.current`).
    ///   - format: how it is parsed.
    ///   - files: where kernel files are read (fixture trees in tests).
    /// - Throws: `CgroupError` `.notFound`, `.permissionDenied` or `.unreadable` when it cannot
    ///   be opened.
    package init(_ hostPath: String, format: Format, files: KernelFiles = .host) throws(CgroupError) {
        realPath = files.path(hostPath)
        faultPlan = files.faultPlan
        do {
            try faultPlan?.check(.open, of: hostPath, at: realPath)
            descriptor = try FileDescriptor.open(realPath, O_RDONLY)
        } catch {
            throw KernelFiles.openError(error.errno, realPath, writing: false)
        }
        self.hostPath = hostPath
        self.format = format
        buffer = .allocate(byteCount: format.bufferSize, alignment: 8)
    }

    deinit {
        buffer.deallocate()
    }

    /// Reads the file afresh.
    ///
    /// - Returns: usage in bytes (for `/proc/meminfo`, the system's used memory).
    /// - Throws: `CgroupError`: `.notFound` when the file's cgroup was removed (`ENODEV`),
    ///   `.unreadable` for another failed read (`isTransient` tells whether it may
    ///   pass), `.malformed` when the content is not in its format.
    package func read() throws(CgroupError) -> UInt64 {
        let count: Int
        do {
            try faultPlan?.check(.read, of: hostPath, at: realPath)
            count = try descriptor.read(into: buffer, atOffset: 0)
        } catch {
            let code: CgroupError.Code = error.errno == ENODEV || error.errno == ENOENT ? .notFound : .unreadable
            throw CgroupError(code, "read failed: \(error.reason)", path: realPath, errno: error.errno)
        }
        let bytes = UnsafeRawBufferPointer(rebasing: buffer[0..<count])
        return try format.parse(bytes, path: realPath)
    }

    /// Parses one line `<key> <decimal>` and a newline of a flat keyed file (`memory.stat`): the first line
    /// whose key is `key` exactly.
    ///
    /// - Throws: `CgroupError` `.malformed` when no whole line has the key (a file cut off by
    ///   the buffer's end included) or its value is not a number.
    package static func parseKeyed(_ key: [UInt8], in bytes: UnsafeRawBufferPointer, path: String) throws(CgroupError) -> UInt64 {
        var lineStart = 0
        while lineStart < bytes.count {
            var lineEnd = lineStart
            while lineEnd < bytes.count && bytes[lineEnd] != UInt8(ascii: "\n") { lineEnd += 1 }
            let named = lineEnd - lineStart > key.count && bytes[lineStart + key.count] == UInt8(ascii: " ")
            if named, (0..<key.count).allSatisfy({ bytes[lineStart + $0] == key[$0] }) {
                // A line the buffer's end cut off has no newline: the kernel ends every line with one.
                let valueStart = lineStart + key.count + 1
                guard lineEnd < bytes.count, lineEnd > valueStart, let value = number(bytes, from: valueStart, to: lineEnd) else {
                    throw CgroupError(.malformed, "a \(String(decoding: key, as: UTF8.self)) line that is not \"<key> <bytes>\"", path: path)
                }
                return value
            }
            lineStart = lineEnd + 1
        }
        throw CgroupError(.malformed, "no \(String(decoding: key, as: UTF8.self)) line in its first \(bytes.count) bytes", path: path)
    }

    /// Parses one unsigned decimal and an optional trailing newline.
    ///
    /// - Throws: `CgroupError` `.malformed` for an empty file, anything but digits, or a
    ///   number beyond `UInt64`.
    package static func parseBytes(_ bytes: UnsafeRawBufferPointer, path: String) throws(CgroupError) -> UInt64 {
        var end = bytes.count
        if end > 0 && bytes[end - 1] == UInt8(ascii: "\n") { end -= 1 }
        guard end > 0 else { throw CgroupError(.malformed, "empty; expected a number", path: path) }
        guard let value = number(bytes, from: 0, to: end) else {
            throw CgroupError(.malformed, "expected an unsigned number of bytes", path: path)
        }
        return value
    }

    /// Parses `MemTotal` and `MemAvailable` (kB) from the start of `/proc/meminfo`.
    ///
    /// - Returns: `MemTotal - MemAvailable`, in bytes (0 when available exceeds total).
    /// - Throws: `CgroupError` `.malformed` when either line is missing from the bytes read
    ///   or its value is not a number of kB.
    package static func parseMeminfo(_ bytes: UnsafeRawBufferPointer, path: String) throws(CgroupError) -> UInt64 {
        var total: UInt64?
        var available: UInt64?
        var lineStart = 0
        while lineStart < bytes.count, total == nil || available == nil {
            var lineEnd = lineStart
            while lineEnd < bytes.count && bytes[lineEnd] != UInt8(ascii: "\n") { lineEnd += 1 }
            guard lineEnd < bytes.count else { break }  // a line cut off by the buffer's end
            if let value = try kilobytes(named: totalKey, in: bytes, from: lineStart, to: lineEnd, path: path) { total = value }
            if let value = try kilobytes(named: availableKey, in: bytes, from: lineStart, to: lineEnd, path: path) { available = value }
            lineStart = lineEnd + 1
        }
        guard let total, let available else {
            throw CgroupError(.malformed, "MemTotal or MemAvailable missing from its first \(Format.meminfo.bufferSize) bytes", path: path)
        }
        return total - min(total, available)
    }

    private static let totalKey = Array("MemTotal:".utf8)
    private static let availableKey = Array("MemAvailable:".utf8)

    /// The value of the line `key   <number> kB` between `start` and `end`, in bytes; `nil`
    /// when the line has another key.
    private static func kilobytes(
        named key: [UInt8], in bytes: UnsafeRawBufferPointer, from start: Int, to end: Int,
        path: String
    ) throws(CgroupError) -> UInt64? {
        guard end - start > key.count else { return nil }
        for index in 0..<key.count where bytes[start + index] != key[index] { return nil }
        var first = start + key.count
        while first < end && bytes[first] == UInt8(ascii: " ") { first += 1 }
        var last = first
        while last < end && bytes[last] >= UInt8(ascii: "0") && bytes[last] <= UInt8(ascii: "9") { last += 1 }
        let unit = end - last == 3 && bytes[last] == UInt8(ascii: " ") && bytes[last + 1] == UInt8(ascii: "k") && bytes[last + 2] == UInt8(ascii: "B")
        guard last > first, unit, let value = number(bytes, from: first, to: last) else {
            throw CgroupError(.malformed, "a \(String(decoding: key.dropLast(), as: UTF8.self)) line that is not \"<number> kB\"", path: path)
        }
        let (scaled, overflow) = value.multipliedReportingOverflow(by: 1024)
        guard !overflow else { throw CgroupError(.malformed, "a value out of range", path: path) }
        return scaled
    }

    /// The decimal between `start` and `end`, or `nil` for a non-digit or overflow.
    private static func number(_ bytes: UnsafeRawBufferPointer, from start: Int, to end: Int) -> UInt64? {
        var value: UInt64 = 0
        for index in start..<end {
            let digit = bytes[index] &- UInt8(ascii: "0")
            guard digit < 10 else { return nil }
            let (shifted, overflow1) = value.multipliedReportingOverflow(by: 10)
            let (added, overflow2) = shifted.addingReportingOverflow(UInt64(digit))
            guard !overflow1, !overflow2 else { return nil }
            value = added
        }
        return value
    }
}
