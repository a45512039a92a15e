import MemwarnSystem

// memwarn-hog: a child process that holds exactly as much anonymous memory as it is told.
// Tests and benchmarks start it, place it in a cgroup, then drive it over stdin:
//
//   hold <size>    grow or shrink to <size> of touched memory; replies
//                  "held <bytes> <start ns> <end ns>" (CLOCK_MONOTONIC around the change)
//   exit           exit 0 (end of input does the same)
//
// Or, for `memwarn run` and its tests: `memwarn-hog --allocate <size>` touches that much
// memory, then exits 0 (if the cgroup lets it live that long).
//
// Or, for the node agent's tests: `memwarn-hog --endpoint <dir> <mode> [<sockets>]` also serves a
// control endpoint, `<dir>/<pid>.sock`, that misbehaves: `hang` answers status and coordinate as a
// memwarn service would (its real usage unknown to it: it claims none) and never answers a release;
// `lie` answers every request as a memwarn service would, claiming 64 GiB of usage and 1 GiB
// freed by each release, and frees nothing; `overflow` answers a release with two entries of
// 2^63-1 bytes each (a sum that overflows); `mute` accepts every connection and never answers
// anything; `late` is `hang` whose first status is answered only after 600 ms (a service still
// starting on a busy machine); `slow` is `hang` answering every status only after 600 ms (a
// service that answers, but slowly); `stall` says in its status that it holds 128 MiB of cache
// and never answers a release; `huge` answers every status with 280,000 consumers (about 25 MB
// on one line, whatever the request asks: a service with a consumer per session, or one that
// predates the summary form); `endless` answers every request with 15 MiB and no newline. With
// `<sockets>` (`mute` only), it listens on that many more sockets beside its own, named
// `1.sock`, `2.sock`… (its own pid skipped) in `<dir>`, and never accepts on them. Commands on stdin as above.
//
// A size is bytes or has a binary unit, as memwarn's own options take it (ByteSize):
// `104857600`, `100M`, `64MiB`, `1.5G`; `0` holds nothing.
//
// Memory is mapped anonymously and every page is written, so the cgroup is charged at once;
// shrinking unmaps, so the charge is returned at once too.
#if canImport(Glibc)
import Glibc
#endif

struct Holder {
    let pageSize = Int(sysconf(Int32(_SC_PAGESIZE)))
    var regions: [(base: UnsafeMutableRawPointer, size: Int)] = []
    var held = 0

    mutating func hold(_ target: Int) -> Bool {
        let wanted = (target + pageSize - 1) / pageSize * pageSize
        while held > wanted, let last = regions.popLast() {
            let excess = held - wanted
            if excess >= last.size {
                munmap(last.base, last.size)
                held -= last.size
            } else {
                let keep = last.size - excess
                munmap(last.base + keep, excess)
                regions.append((last.base, keep))
                held -= excess
            }
        }
        if wanted > held {
            let size = wanted - held
            guard let base = mmap(nil, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0), base != MAP_FAILED else { return false }
            var offset = 0
            while offset < size {
                base.storeBytes(of: UInt8(1), toByteOffset: offset, as: UInt8.self)
                offset += pageSize
            }
            regions.append((base, size))
            held = wanted
        }
        return true
    }
}

func monotonicNanoseconds() -> UInt64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
}

func reply(_ text: String) {
    StandardStream.output.writeLine(text)
}

/// A byte count as the hog takes it: bytes, or a size with a unit (`100M`, `64MiB`, `1.5G`).
func byteCount(_ text: some StringProtocol) -> Int? {
    ByteSize.parse(String(text), allowingZero: true).flatMap { Int(exactly: $0) }
}

/// Serves a misbehaving control endpoint on a thread of its own (see the header).
func serveEndpoint(directory: String, mode: String) throws(SystemError) {
    let lying = !["hang", "late", "slow", "stall", "huge"].contains(mode)
    signal(SIGPIPE, SIG_IGN)  // a reply to a client that gave up fails, it does not end the hog
    let path = directory + "/\(getpid()).sock"
    let ready = ConditionLock<Result<Void, SystemError>?>(nil)
    try SystemThread.start(name: "hog-endpoint") {
        func listen() throws(SystemError) -> FileDescriptor {
            let listener = try FileDescriptor.unixStreamSocket(nonBlocking: false)
            try listener.bind(to: UnixSocketAddress(path: path))
            try listener.listen(backlog: 16)
            return listener
        }
        let made = Result { () throws(SystemError) in try listen().take() }
        ready.withLock { $0 = made.map { _ in () } }
        guard case .success(let descriptor) = made else { return }
        let listener = FileDescriptor(adopting: descriptor)
        var hung: [Int32] = []  // hung connections stay open, unanswered
        var statusAnswered = false
        while true {
            let accepted: FileDescriptor?
            do {
                accepted = try listener.acceptConnection()
            } catch {
                continue
            }
            guard let connection = accepted else { continue }
            var chunk = [UInt8](repeating: 0, count: 4096)
            // Accepted non-blocking: wait for the request (a client may check the peer first).
            guard (try? connection.waitUntilReady(for: .readable, timeout: .seconds(5))) == true,
                let count = try? connection.receive(into: &chunk), count > 0
            else { continue }
            if mode == "mute" {
                hung.append(connection.take())
                continue
            }
            if mode == "endless" {
                deliver([UInt8](repeating: UInt8(ascii: "x"), count: 15 << 20), on: connection)
                continue
            }
            let request = String(decoding: chunk[0..<count], as: UTF8.self)
            let pid = getpid()
            let claim = lying ? 68_719_476_736 : 0
            let reply: String
            if request.contains("\"status\"") {
                if (mode == "late" && !statusAnswered) || mode == "slow" { SystemThread.sleep(for: .milliseconds(600)) }
                statusAnswered = true
                let held = mode == "stall" ? 128 << 20 : claim
                let consumers =
                    mode == "huge"
                    ? (0..<280_000).map { #"{"name":"session-\#($0)","tier":"caches","footprintBytes":4096}"# }.joined(separator: ",")
                    : #"{"name":"claims","tier":"caches","footprintBytes":\#(held)}"#
                reply =
                    #"{"ok":true,"request":"status","pid":\#(pid),"level":"critical","usageBytes":\#(claim),"limitBytes":null,"cgroupPath":null,"consumers":[\#(consumers)]}"#
            } else if request.contains("\"coordinate\"") {
                reply = #"{"ok":true,"request":"coordinate","pid":\#(pid),"cgroup":"/","leaseMilliseconds":5000}"#
            } else if !lying {
                hung.append(connection.take())
                continue
            } else if mode == "overflow" {
                let most = Int64.max
                reply =
                    #"{"ok":true,"request":"warn","pid":\#(pid),"report":{"level":"warning","targetBytes":1,"headroomBytes":0,"growthBytesPerSecond":0,"freedBytes":\#(most),"metTarget":true,"trimmedHeap":false,"durationMicroseconds":1,"entries":[{"consumer":"a","tier":"caches","bytesBefore":\#(most),"bytesAfter":0,"bytesFreed":\#(most),"durationMicroseconds":1},{"consumer":"b","tier":"caches","bytesBefore":\#(most),"bytesAfter":0,"bytesFreed":\#(most),"durationMicroseconds":1}]}}"#
            } else {
                reply =
                    #"{"ok":true,"request":"warn","pid":\#(pid),"report":{"level":"warning","targetBytes":1,"headroomBytes":0,"growthBytesPerSecond":0,"freedBytes":1073741824,"metTarget":true,"trimmedHeap":false,"durationMicroseconds":1,"entries":[{"consumer":"claims","tier":"caches","bytesBefore":1073741824,"bytesAfter":0,"bytesFreed":1073741824,"durationMicroseconds":1}]}}"#
            }
            deliver(Array((reply + "\n").utf8), on: connection)
        }
    }
    if case .failure(let error)? = ready.wait(timeout: nil, until: { $0 }) { throw error }
}

/// Writes all of `bytes` to a connection (accepted non-blocking), waiting while its buffer is
/// full, until the peer has taken them or gone (or 10 s pass with nothing taken).
func deliver(_ bytes: [UInt8], on connection: borrowing FileDescriptor) {
    var offset = 0
    while offset < bytes.count {
        let written: Int?
        do {
            written = try bytes.withUnsafeBytes { buffer in
                try Result { () throws(SystemError) in try connection.write(UnsafeRawBufferPointer(rebasing: buffer[offset...])) }.get()
            }
        } catch {
            return  // the peer went
        }
        if let written {
            offset += written
        } else if (try? connection.waitUntilReady(for: .writable, timeout: .seconds(10))) != true {
            return
        }
    }
}

/// Listens on `count` more sockets in `directory`, never accepting: each connect completes into
/// the backlog, and nothing is ever answered. They are numbered from 1, skipping the hog's own
/// pid (its endpoint's name, when the machine's pids are that low).
func listenMute(count: Int, in directory: String) throws(SystemError) {
    let own = Int(getpid())
    for index in (1...max(1, count + 1)).lazy.filter({ $0 != own }).prefix(max(1, count)) {
        let listener = try FileDescriptor.unixStreamSocket(nonBlocking: false)
        try listener.bind(to: UnixSocketAddress(path: directory + "/\(index).sock"))
        try listener.listen(backlog: 16)
        _ = listener.take()  // held open until the hog ends
    }
}

var holder = Holder()
if CommandLine.arguments.count == 3, CommandLine.arguments[1] == "--allocate", let bytes = byteCount(CommandLine.arguments[2]) {
    exit(holder.hold(bytes) ? 0 : 1)
} else if (4...5).contains(CommandLine.arguments.count), CommandLine.arguments[1] == "--endpoint",
    ["hang", "lie", "overflow", "mute", "late", "slow", "stall", "huge", "endless"].contains(CommandLine.arguments[3]),
    CommandLine.arguments.count == 4 || (CommandLine.arguments[3] == "mute" && Int(CommandLine.arguments[4]) != nil)
{
    do {
        try serveEndpoint(directory: CommandLine.arguments[2], mode: CommandLine.arguments[3])
        if CommandLine.arguments.count == 5 { try listenMute(count: Int(CommandLine.arguments[4]) ?? 0, in: CommandLine.arguments[2]) }
    } catch {
        StandardStream.error.writeLine("memwarn-hog: the endpoint could not be served: \(error)")
        exit(1)
    }
} else if CommandLine.arguments.count > 1 {
    StandardStream.error.writeLine(
        "usage: memwarn-hog [--allocate <size> | --endpoint <dir> hang|lie|overflow|mute|late|slow|stall|huge|endless [<sockets>]]   (a size: bytes, or 100M, 64MiB, 1.5G; without arguments: commands on stdin)"
    )
    exit(2)
}
while let line = readLine() {
    let words = line.split(separator: " ")
    if words.first == "exit" { exit(0) }
    guard words.count == 2, words[0] == "hold", let bytes = byteCount(words[1]) else {
        reply("error: expected \"hold <size>\" (bytes, or 100M, 64MiB, 1.5G) or \"exit\", got \"\(line)\"")
        continue
    }
    let start = monotonicNanoseconds()
    guard holder.hold(bytes) else {
        reply("error: mmap of \(bytes) bytes failed: errno \(errno)")
        continue
    }
    reply("held \(holder.held) \(start) \(monotonicNanoseconds())")
}
