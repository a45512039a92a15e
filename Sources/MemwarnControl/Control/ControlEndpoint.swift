import MemwarnSystem

#if canImport(Glibc)
import Glibc
#endif

/// A control endpoint: `<pid>.sock` (mode 0600) in a `ControlDirectory`, served by an
/// event loop on a thread of its own.
///
/// Every connection is non-blocking and has a deadline, so a slow or hostile client never
/// blocks another one, nor the service: a client has ``requestTimeout`` to send its line and
/// as long again to take the reply, then it is closed. Beyond ``connectionLimit`` open
/// connections, a new one is accepted, told so and closed at once. A peer whose uid is neither
/// this process's effective uid nor root is refused before anything is read. Releases run
/// synchronously on the endpoint's thread.
final class ControlEndpoint: @unchecked Sendable {
    // @unchecked: `connections`, `listenerRegistration` and `listenerPause` are touched only on
    // the loop's thread (its methods assert it); `subjects` is guarded by its lock; everything
    // else is set in init and never changes.

    /// The most connections served at once: 256, or a quarter of the process's file-descriptor
    /// limit (`RLIMIT_NOFILE`) when that is less, so that a flood of connections never takes the
    /// descriptors the monitor and the service need.
    static let connectionLimit: Int = {
        guard let descriptors = ResourceLimits.openDescriptors else { return 256 }
        return connectionLimit(forDescriptorLimit: Int(clamping: descriptors))
    }()

    /// The connection limit for a descriptor limit: a quarter of it, at least 4, at most 256.
    static func connectionLimit(forDescriptorLimit descriptors: Int) -> Int {
        min(256, max(4, descriptors / 4))
    }
    /// How long a client has to send its request line, and again to take the reply.
    static let requestTimeout = Duration.seconds(2)

    /// The directory it was made in, as given.
    let directory: String
    /// The socket's path.
    let socketPath: String
    private let loop: EventLoop
    private let listener: FileDescriptor
    private let socketFile: (device: UInt64, inode: UInt64)
    private let subjects = Locked<(next: Int, joined: [(id: Int, subject: ControlSubject)])>((0, []))
    private var connections: [ObjectIdentifier: ControlConnection] = [:]
    private var listenerRegistration: EventLoop.Registration?
    private var listenerPause: EventLoop.Deadline?

    /// Creates the directory if needed and listens on `<pid>.sock` in it (replacing a stale
    /// socket left by an earlier process with this pid). Call ``start()`` to serve.
    ///
    /// - Throws: `ControlError` when the directory is unusable or the socket cannot be made.
    init(directory: String) throws(ControlError) {
        try ControlDirectory.prepare(directory)
        self.directory = directory
        socketPath = ControlDirectory.socketPath(for: getpid(), in: directory)
        do throws(SystemError) {
            let address = try UnixSocketAddress(path: socketPath)
            loop = try EventLoop()
            let listener = try FileDescriptor.unixStreamSocket(nonBlocking: true)
            socketFile = try Self.bind(listener, to: address)
            do throws(SystemError) {
                try listener.listen(backlog: Int32(Self.connectionLimit))
            } catch {
                Self.removeSocketFile(socketPath, ifStill: socketFile)
                throw error
            }
            self.listener = listener
        } catch  where error.errno == ENAMETOOLONG {
            throw ControlError(.pathTooLong, "the socket path \(socketPath) is longer than \(UnixSocketAddress.maximumPathBytes) bytes")
        } catch {
            throw ControlError(error)
        }
    }

    /// Binds, replacing a stale socket of this pid, and sets the mode to 0600.
    private static func bind(_ listener: borrowing FileDescriptor, to address: UnixSocketAddress) throws(SystemError) -> (device: UInt64, inode: UInt64) {
        do {
            try listener.bind(to: address)
        } catch  where error.errno == EADDRINUSE {
            guard FileType.at(address.path, followingLinks: false) == .socket else { throw error }
            try? FileSystem.removeFile(address.path)  // our pid's socket: a process before us had this pid
            try listener.bind(to: address)
        }
        do {
            try FileSystem.changeMode(address.path, to: 0o600)
            let status = try FileStatus.at(address.path, followingLinks: false)
            return (status.device, status.inode)
        } catch {
            try? FileSystem.removeFile(address.path)
            throw error
        }
    }

    /// Starts the endpoint's thread, which watches the socket.
    ///
    /// - Throws: `ControlError` when the thread cannot start or the socket cannot be watched
    ///   (the socket file is removed then).
    func start() throws(ControlError) {
        let started = ConditionLock<Result<Void, SystemError>?>(nil)
        do {
            try SystemThread.start(name: "memwarn-control") { [self] in
                do {
                    try loop.run {
                        listenerRegistration = try loop.watch(listener, for: .readable) { [unowned self] _ in acceptConnections() }
                        started.withLock { $0 = .success(()) }
                    }
                } catch {
                    started.withLock { $0 = .failure((error as? SystemError) ?? SystemError("epoll_wait", errno: EIO)) }
                }
            }
            try started.wait(timeout: nil) { $0 }!.get()
        } catch {
            Self.removeSocketFile(socketPath, ifStill: socketFile)
            throw ControlError(error)
        }
    }

    /// Closes every connection and the socket, removes the socket file and ends the thread;
    /// returns once all that is done.
    func stop() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            loop.execute { [self] in
                tearDown()
                loop.stop()
                continuation.resume()
            }
        }
    }

    // MARK: Subjects

    /// Adds a service the endpoint answers for; the first one added and still present answers.
    ///
    /// - Returns: an ID for ``leave(_:)``.
    func join(_ subject: ControlSubject) -> Int {
        subjects.withLock { subjects in
            subjects.next += 1
            subjects.joined.append((subjects.next, subject))
            return subjects.next
        }
    }

    /// Removes a service. Returns whether none is left.
    func leave(_ id: Int) -> Bool {
        subjects.withLock { subjects in
            subjects.joined.removeAll { $0.id == id }
            return subjects.joined.isEmpty
        }
    }

    private func reply(to line: [UInt8], from peerPid: Int32) -> ControlReply {
        guard let subject = subjects.withLock({ $0.joined.first?.subject }) else { return .failure("the monitor is stopping") }
        do {
            let (request, summary) = try ControlRequest.parse(line: line)
            return subject.reply(to: request, from: peerPid, summary: summary)
        } catch {
            return .failure(error.message)
        }
    }

    // MARK: Connections (loop thread)

    private func acceptConnections() {
        loop.preconditionOnLoop()
        while true {
            let accepted: FileDescriptor?
            do {
                accepted = try listener.acceptConnection()
            } catch {
                pauseListener()  // out of descriptors or memory: try again shortly
                return
            }
            guard let socket = accepted else { return }
            let connection = ControlConnection(socket)
            if let refusal = refusal(of: connection) {
                _ = connection.startReply(ControlReply.failure(refusal).line)
            } else {
                admit(connection)
            }
        }
    }

    private func pauseListener() {
        guard let listenerRegistration else { return }
        do {
            try loop.rewatch(listenerRegistration, for: .none)
        } catch {
            return  // not paused: the next accept fails the same way and tries again
        }
        listenerPause = loop.schedule(at: .now + .milliseconds(100)) { [unowned self] in
            listenerPause = nil
            try? loop.rewatch(listenerRegistration, for: .readable)
        }
    }

    /// Why a new connection is turned away, or `nil` to serve it.
    private func refusal(of connection: ControlConnection) -> String? {
        let peer: PeerCredentials
        do {
            peer = try connection.socket.peerCredentials()
        } catch {
            return "refused: the peer's credentials could not be read (\(error.reason))"
        }
        let own = geteuid()
        guard peer.uid == own || peer.uid == 0 else {
            return "refused: uid \(peer.uid) may not control process \(getpid()) (only uid \(own) and root may)"
        }
        guard connections.count < Self.connectionLimit else {
            return "too many connections (limit \(Self.connectionLimit)); try again"
        }
        connection.peerPid = peer.pid
        return nil
    }

    private func admit(_ connection: ControlConnection) {
        do {
            connection.registration = try loop.watch(connection.socket, for: .readable) { [unowned self, unowned connection] _ in serve(connection) }
        } catch {
            return  // closed with the connection
        }
        connections[ObjectIdentifier(connection)] = connection
        connection.deadline = loop.schedule(at: .now + Self.requestTimeout) { [unowned self, unowned connection] in expire(connection) }
    }

    private func serve(_ connection: ControlConnection) {
        switch connection.phase {
        case .reading:
            switch connection.read() {
            case .waiting: return
            case .closed: finish(connection)
            case .tooLong: respond(connection, .failure("request too long: more than \(ControlRequest.maximumLineBytes) bytes without a newline"))
            case .line(let line): respond(connection, reply(to: line, from: connection.peerPid))
            }
        case .replying:
            if connection.sendMore() { finish(connection) }
        }
    }

    private func respond(_ connection: ControlConnection, _ reply: ControlReply) {
        guard !connection.startReply(reply.line), let registration = connection.registration else {
            finish(connection)
            return
        }
        do {
            try loop.rewatch(registration, for: .writable)
        } catch {
            finish(connection)  // cannot wait for room: the client gets what was sent
            return
        }
        if let deadline = connection.deadline { loop.cancel(deadline) }
        connection.deadline = loop.schedule(at: .now + Self.requestTimeout) { [unowned self, unowned connection] in expire(connection) }
    }

    private func expire(_ connection: ControlConnection) {
        guard connections[ObjectIdentifier(connection)] === connection else { return }
        connection.deadline = nil
        if connection.phase == .reading {
            // A loop starved of CPU (a CPU-limited pod) can reach the deadline in the same turn as
            // the request's readable event: read what is there before calling it late.
            serve(connection)
            guard connections[ObjectIdentifier(connection)] === connection, connection.phase == .reading, connection.deadline == nil else { return }
            _ = connection.startReply(ControlReply.failure("timeout: no complete request line within \(Self.requestTimeout)").line)
        }
        finish(connection)
    }

    /// Forgets a connection (once a client sees the end, its place is free), which closes it.
    private func finish(_ connection: ControlConnection) {
        if let deadline = connection.deadline { loop.cancel(deadline) }
        if let registration = connection.registration { loop.unwatch(registration) }
        connections[ObjectIdentifier(connection)] = nil
    }

    private func tearDown() {
        loop.preconditionOnLoop()
        for connection in Array(connections.values) { finish(connection) }
        if let listenerPause { loop.cancel(listenerPause) }
        if let listenerRegistration { loop.unwatch(listenerRegistration) }
        removeSocketFile()
    }

    /// Removes the socket file if it is still ours (a later endpoint of this pid may have
    /// replaced it). Any thread (also at exit).
    func removeSocketFile() {
        Self.removeSocketFile(socketPath, ifStill: socketFile)
    }

    private static func removeSocketFile(_ path: String, ifStill file: (device: UInt64, inode: UInt64)) {
        if let status = try? FileStatus.at(path, followingLinks: false), status.device == file.device, status.inode == file.inode {
            try? FileSystem.removeFile(path)
        }
    }
}
