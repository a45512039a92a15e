import CgroupKit
import CLibcgroup
#if canImport(Glibc)
import Glibc
#endif

/// systemd's memory-pressure hand-off (`systemd.resource-control(5)`, `MemoryPressureWatch=`):
/// `MEMORY_PRESSURE_WATCH` names what to watch — a PSI file, a FIFO or an `AF_UNIX` socket —
/// and `MEMORY_PRESSURE_WRITE`, base64, what to write to it first (a PSI trigger for a PSI
/// file). A value of `/dev/null` turns it off.
final class SystemdPressureWatch {
    /// The descriptor to watch.
    let descriptor: Int32
    /// The epoll flags that signal pressure: `EPOLLPRI` for a PSI file, `EPOLLIN` otherwise.
    let events: UInt32
    /// Whether each wake-up carries bytes to read and discard (FIFO and socket).
    let isStream: Bool
    let path: String

    static let watchVariable = "MEMORY_PRESSURE_WATCH"
    static let writeVariable = "MEMORY_PRESSURE_WRITE"

    /// The watch systemd asked for, or `nil` when the variables are absent or say `/dev/null`.
    ///
    /// - Throws: ``CgroupError`` when the path cannot be opened, the write is not base64,
    ///   or the kernel refuses the trigger: systemd asked for it, so failing quietly would hide
    ///   a broken unit.
    static func fromEnvironment(_ environment: [String: String]) throws(CgroupError) -> SystemdPressureWatch? {
        guard let path = environment[watchVariable], !path.isEmpty, path != "/dev/null" else { return nil }
        var payload: [UInt8] = []
        if let encoded = environment[writeVariable], !encoded.isEmpty {
            guard let decoded = Base64.decode(encoded) else {
                throw CgroupError(.malformed, "\(writeVariable) is not base64", path: path)
            }
            payload = decoded
        }
        return try SystemdPressureWatch(path: path, payload: payload)
    }

    init(path: String, payload: [UInt8]) throws(CgroupError) {
        self.path = path
        var info = stat()
        guard stat(path, &info) == 0 else { throw KernelFiles.openError(errno, path, writing: false) }
        let type = info.st_mode & S_IFMT
        var bytes = payload
        if type == S_IFSOCK {
            let socketDescriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            descriptor = socketDescriptor
            guard socketDescriptor >= 0 else { throw EventLoop.systemError("socket", path: path) }
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            let capacity = MemoryLayout.size(ofValue: address.sun_path)
            guard path.utf8.count < capacity else {
                close(descriptor)
                throw CgroupError(.unsupported, "socket path longer than \(capacity - 1) bytes", path: path)
            }
            withUnsafeMutableBytes(of: &address.sun_path) { raw in
                raw.copyBytes(from: path.utf8)
                raw[path.utf8.count] = 0
            }
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(socketDescriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
            guard connected == 0 else {
                let error = EventLoop.systemError("connect", path: path)
                close(descriptor)
                throw error
            }
            events = EPOLLIN.rawValue
            isStream = true
        } else if type == S_IFIFO {
            descriptor = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
            guard descriptor >= 0 else { throw KernelFiles.openError(errno, path, writing: false) }
            events = EPOLLIN.rawValue
            isStream = true
        } else {
            descriptor = open(path, (bytes.isEmpty ? O_RDONLY : O_RDWR) | O_NONBLOCK | O_CLOEXEC)
            guard descriptor >= 0 else { throw KernelFiles.openError(errno, path, writing: !bytes.isEmpty) }
            if bytes.last != 0 && !bytes.isEmpty { bytes.append(0) }  // PSI wants the NUL
            events = EPOLLPRI.rawValue
            isStream = false
        }
        guard !bytes.isEmpty else { return }
        let written = bytes.withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress, $0.count) }
        guard written == bytes.count else {
            let error = CgroupError(.unwritable, "writing \(Self.writeVariable) failed: \(String(cString: strerror(errno)))", path: path, errno: errno)
            close(descriptor)
            throw error
        }
    }

    /// Discards what a FIFO or socket delivered; returns `false` when the peer closed it.
    func drain() -> Bool {
        guard isStream else { return true }
        var buffer = [UInt8](repeating: 0, count: 512)
        while true {
            let count = buffer.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
            if count > 0 { continue }
            return count < 0  // EAGAIN: drained, still open; 0: end of file
        }
    }

    deinit { close(descriptor) }
}

/// Standard base64 (RFC 4648) decoding, for `MEMORY_PRESSURE_WRITE`.
enum Base64 {
    static func decode(_ text: String) -> [UInt8]? {
        var output: [UInt8] = []
        var buffer: UInt32 = 0
        var bits = 0
        var padding = 0
        for byte in text.utf8 {
            let value: UInt32
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): value = UInt32(byte - UInt8(ascii: "A"))
            case UInt8(ascii: "a")...UInt8(ascii: "z"): value = UInt32(byte - UInt8(ascii: "a")) + 26
            case UInt8(ascii: "0")...UInt8(ascii: "9"): value = UInt32(byte - UInt8(ascii: "0")) + 52
            case UInt8(ascii: "+"): value = 62
            case UInt8(ascii: "/"): value = 63
            case UInt8(ascii: "="): padding += 1; continue
            default: return nil
            }
            guard padding == 0 else { return nil }
            buffer = buffer << 6 | value
            bits += 6
            if bits >= 8 {
                bits -= 8
                output.append(UInt8(truncatingIfNeeded: buffer >> UInt32(bits)))
            }
        }
        guard padding <= 2 else { return nil }
        return output
    }
}
