import CgroupKit
import MemwarnSystem

#if canImport(Glibc)
import Glibc
#endif

/// systemd's memory-pressure hand-off (`systemd.resource-control(5)`, `MemoryPressureWatch=`):
/// `MEMORY_PRESSURE_WATCH` names what to watch — a PSI file, a FIFO or an `AF_UNIX` socket —
/// and `MEMORY_PRESSURE_WRITE`, base64, what to write to it first (a PSI trigger for a PSI
/// file). A value of `/dev/null` turns it off. Every firing is a warning.
final class SystemdPressureWatch: PressureSource {
    /// The descriptor watched.
    let descriptor: FileDescriptor
    /// The events that signal pressure: `priority` for a PSI file, `readable` otherwise.
    let events: EpollEvents
    /// Whether each wake-up carries bytes to read and discard (FIFO and socket).
    let isStream: Bool
    let path: String

    static let watchVariable = "MEMORY_PRESSURE_WATCH"
    static let writeVariable = "MEMORY_PRESSURE_WRITE"

    /// The watch systemd asked for, or `nil` when the variables are absent or say `/dev/null`.
    ///
    /// - Throws: `CgroupError` when the path cannot be opened, the write is not base64,
    ///   or the kernel refuses the trigger. The plan says it and arms without it (a broken unit
    ///   must not leave the service with no monitor at all).
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
        let type: FileType
        do {
            type = try FileStatus.at(path).type
        } catch {
            throw KernelFiles.openError(error.errno, path, writing: false)
        }
        var bytes = payload
        do throws(SystemError) {
            switch type {
            case .socket:
                let address = try UnixSocketAddress(path: path)
                // The connect may wait for the listener's backlog; the reads after it must not:
                // the drain reads until "would block", which a blocking socket never says.
                let socket = try FileDescriptor.unixStreamSocket(nonBlocking: false)
                try socket.connect(to: address)
                try socket.makeNonBlocking()
                descriptor = socket
                (events, isStream) = (.readable, true)
            case .fifo:
                // Read-write, so that the FIFO always has a writer (this one): a writer that
                // closes its end is then no end of file, and the next writer is heard too.
                descriptor = try FileDescriptor.open(path, O_RDWR | O_NONBLOCK)
                (events, isStream) = (.readable, true)
            default:
                descriptor = try FileDescriptor.open(path, (bytes.isEmpty ? O_RDONLY : O_RDWR) | O_NONBLOCK)
                if bytes.last != 0 && !bytes.isEmpty { bytes.append(0) }  // PSI wants the NUL
                (events, isStream) = (.priority, false)
            }
        } catch  where error.call == "open" {
            throw KernelFiles.openError(error.errno, path, writing: !bytes.isEmpty)
        } catch {
            throw CgroupError(.unsupported, "\(error)", path: path, errno: error.errno)
        }
        guard !bytes.isEmpty else { return }
        do {
            try descriptor.writeWhole(bytes)
            if type == .fifo {
                // Held open read-write, a FIFO hands the write back to this reader: read it
                // away, or it would be taken for the first notification.
                var buffer = [UInt8](repeating: 0, count: 512)
                while let count = try descriptor.read(into: &buffer), count > 0 {}
            }
        } catch {
            throw CgroupError(.unwritable, "writing \(Self.writeVariable) failed: \(error.reason)", path: path, errno: error.errno)
        }
    }

    func register(on loop: EventLoop, _ fired: @escaping (EpollEvents) -> Void) throws(SystemError) -> EventLoop.Registration? {
        try loop.watch(descriptor, for: events, fired)
    }

    var description: String { "systemd \(path)" }

    /// Discards what a FIFO or socket delivered. A FIFO is held open for writing too, so it
    /// never ends and every writer is heard; a socket whose server closed it is not watched
    /// any more.
    func drain(_ fired: EpollEvents) -> PressureSourceReport {
        guard isStream else { return .wake(.warning, .systemd) }
        var buffer = [UInt8](repeating: 0, count: 512)
        while true {
            let count: Int?
            do {
                count = try descriptor.read(into: &buffer)
            } catch {
                return .wake(.warning, .systemd, then: .stopWatching)
            }
            guard let count else { return .wake(.warning, .systemd) }  // drained, still open
            if count == 0 { return .wake(.warning, .systemd, then: .stopWatching) }  // end of file
        }
    }
}
