import CLibcgroup
#if canImport(Glibc)
import Glibc
#endif

/// A control endpoint: `<pid>.sock` (mode 0600) in a ``ControlDirectory``, served by an
/// event loop on a thread of its own.
///
/// Every connection is non-blocking and has a deadline, so a slow or hostile client never
/// blocks another one, nor the monitor: a client has ``requestTimeout`` to send its line and
/// as long again to take the reply, then it is closed. Beyond ``connectionLimit`` open
/// connections, a new one is accepted, told so and closed at once. A peer whose uid is neither
/// this process's effective uid nor root is refused before anything is read. Releases run
/// synchronously on the endpoint's thread.
final class ControlEndpoint: @unchecked Sendable {
    // @unchecked: `connections` and `listenerPause` are touched only on the loop's thread;
    // `subjects` is guarded by its lock; everything else is set in init and never changes.

    /// The most connections served at once: 256, or a quarter of the process's file-descriptor
    /// limit (`RLIMIT_NOFILE`) when that is less, so that a flood of connections never takes the
    /// descriptors the monitor and the service need.
    static let connectionLimit: Int = {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur != rlim_t.max else { return 256 }  // RLIM_INFINITY
        return connectionLimit(forDescriptorLimit: Int(clamping: limit.rlim_cur))
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
    private let listener: Int32
    private let socketFile: (device: UInt64, inode: UInt64)
    private let subjects = Locked<(next: Int, joined: [(id: Int, subject: ControlSubject)])>((0, []))
    private var connections: [Int32: ControlConnection] = [:]
    private var listenerPause: Int?

    /// Creates the directory if needed and listens on `<pid>.sock` in it (replacing a stale
    /// socket left by an earlier process with this pid). Call ``start()`` to serve.
    ///
    /// - Throws: ``ControlError`` when the directory is unusable or the socket cannot be made.
    init(directory: String) throws(ControlError) {
        try ControlDirectory.prepare(directory)
        self.directory = directory
        socketPath = ControlDirectory.socketPath(for: getpid(), in: directory)
        let address = try UnixSocketAddress(path: socketPath)
        do {
            loop = try EventLoop()
        } catch {
            throw ControlError("the control endpoint's event loop: \(error)")
        }
        listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard listener >= 0 else { throw .system("socket for", socketPath) }
        do throws(ControlError) {
            socketFile = try Self.bind(listener, to: address, path: socketPath)
        } catch {
            close(listener)
            throw error
        }
        guard listen(listener, Int32(Self.connectionLimit)) == 0 else {
            let error = ControlError.system("listen", socketPath)
            unlinkAndClose()
            throw error
        }
        do {
            try loop.watch(listener, events: EPOLLIN.rawValue) { [unowned self] _ in acceptConnections() }
        } catch {
            unlinkAndClose()
            throw ControlError("epoll for \(socketPath): \(error)")
        }
    }

    /// Binds, replacing a stale socket of this pid, and sets the mode to 0600.
    private static func bind(_ listener: Int32, to address: UnixSocketAddress, path: String) throws(ControlError) -> (device: UInt64, inode: UInt64) {
        var bound = address.withSocketAddress { Glibc.bind(listener, $0, $1) } == 0
        var status = stat()
        if !bound && errno == EADDRINUSE && lstat(path, &status) == 0 && status.st_mode & S_IFMT == S_IFSOCK {
            unlink(path)  // our pid's socket: a process before us had this pid
            bound = address.withSocketAddress { Glibc.bind(listener, $0, $1) } == 0
        }
        guard bound else { throw .system("bind", path) }
        guard chmod(path, 0o600) == 0, lstat(path, &status) == 0 else {
            let error = ControlError.system("chmod", path)
            unlink(path)
            throw error
        }
        return (UInt64(status.st_dev), UInt64(status.st_ino))
    }

    /// Starts the endpoint's thread.
    func start() {
        LoopThread.start(name: "memwarn-control") { [loop] in loop.run() }
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

    /// Adds a monitor the endpoint answers for; the first one added and still present answers.
    ///
    /// - Returns: an ID for ``leave(_:)``.
    func join(_ subject: ControlSubject) -> Int {
        subjects.withLock { subjects in
            subjects.next += 1
            subjects.joined.append((subjects.next, subject))
            return subjects.next
        }
    }

    /// Removes a monitor. Returns whether none is left.
    func leave(_ id: Int) -> Bool {
        subjects.withLock { subjects in
            subjects.joined.removeAll { $0.id == id }
            return subjects.joined.isEmpty
        }
    }

    private func reply(to line: [UInt8]) -> ControlReply {
        guard let subject = subjects.withLock({ $0.joined.first?.subject }) else { return .failure("the monitor is stopping") }
        do {
            return subject.reply(to: try ControlRequest(line: line))
        } catch {
            return .failure(error.message)
        }
    }

    // MARK: Connections (loop thread)

    private func acceptConnections() {
        while true {
            let descriptor = memwarn_accept_nonblocking(listener)
            guard descriptor >= 0 else {
                switch errno {
                case EINTR, ECONNABORTED: continue
                case EAGAIN, EWOULDBLOCK: return
                default: pauseListener()  // out of descriptors or memory: try again shortly
                }
                return
            }
            if let refusal = refusal(of: descriptor) {
                _ = ControlConnection(descriptor: descriptor).startReply(ControlReply.failure(refusal).line)
                close(descriptor)
            } else {
                admit(ControlConnection(descriptor: descriptor))
            }
        }
    }

    private func pauseListener() {
        loop.rewatch(listener, events: 0)
        listenerPause = loop.schedule(at: .now + .milliseconds(100)) { [unowned self] in
            listenerPause = nil
            loop.rewatch(listener, events: EPOLLIN.rawValue)
        }
    }

    /// Why a new connection is turned away, or `nil` to serve it.
    private func refusal(of descriptor: Int32) -> String? {
        var pid: pid_t = 0
        var uid: uid_t = 0
        var gid: gid_t = 0
        guard memwarn_peer_credentials(descriptor, &pid, &uid, &gid) == 0 else {
            return "refused: the peer's credentials could not be read (\(String(cString: strerror(errno))))"
        }
        let own = geteuid()
        guard uid == own || uid == 0 else {
            return "refused: uid \(uid) may not control process \(getpid()) (only uid \(own) and root may)"
        }
        guard connections.count < Self.connectionLimit else {
            return "too many connections (limit \(Self.connectionLimit)); try again"
        }
        return nil
    }

    private func admit(_ connection: ControlConnection) {
        do {
            try loop.watch(connection.descriptor, events: EPOLLIN.rawValue) { [unowned self] _ in serve(connection) }
        } catch {
            close(connection.descriptor)
            return
        }
        connections[connection.descriptor] = connection
        connection.deadline = loop.schedule(at: .now + Self.requestTimeout) { [unowned self] in expire(connection) }
    }

    private func serve(_ connection: ControlConnection) {
        switch connection.phase {
        case .reading:
            switch connection.read() {
            case .waiting: return
            case .closed: finish(connection)
            case .tooLong: respond(connection, .failure("request too long: more than \(ControlRequest.maximumLineBytes) bytes without a newline"))
            case .line(let line): respond(connection, reply(to: line))
            }
        case .replying:
            if connection.sendMore() { finish(connection) }
        }
    }

    private func respond(_ connection: ControlConnection, _ reply: ControlReply) {
        if connection.startReply(reply.line) {
            finish(connection)
            return
        }
        loop.rewatch(connection.descriptor, events: EPOLLOUT.rawValue)
        if let deadline = connection.deadline { loop.cancelDeadline(deadline) }
        connection.deadline = loop.schedule(at: .now + Self.requestTimeout) { [unowned self] in expire(connection) }
    }

    private func expire(_ connection: ControlConnection) {
        guard connections[connection.descriptor] === connection else { return }
        connection.deadline = nil
        if connection.phase == .reading {
            _ = connection.startReply(ControlReply.failure("timeout: no complete request line within \(Self.requestTimeout)").line)
        }
        finish(connection)
    }

    private func finish(_ connection: ControlConnection) {
        if let deadline = connection.deadline { loop.cancelDeadline(deadline) }
        // Forgotten before the close: once a client sees the end, its place is free.
        connections[connection.descriptor] = nil
        loop.unwatch(connection.descriptor)
        close(connection.descriptor)
    }

    private func tearDown() {
        for connection in Array(connections.values) { finish(connection) }
        if let listenerPause { loop.cancelDeadline(listenerPause) }
        loop.unwatch(listener)
        unlinkAndClose()
    }

    /// Removes the socket file if it is still ours (a later endpoint of this pid may have
    /// replaced it), and closes the listener.
    private func unlinkAndClose() {
        close(listener)
        removeSocketFile()
    }

    /// Removes the socket file if it is still ours. Any thread (also at exit).
    func removeSocketFile() {
        var status = stat()
        if lstat(socketPath, &status) == 0, UInt64(status.st_dev) == socketFile.device, UInt64(status.st_ino) == socketFile.inode {
            unlink(socketPath)
        }
    }
}
