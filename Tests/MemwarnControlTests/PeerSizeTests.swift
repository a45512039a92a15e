import Foundation
import MemwarnSystem
import Testing

@testable import MemwarnControl
@testable import MemwarnRelease

#if canImport(Glibc)
import Glibc
#endif

/// The sizes a peer sends are only the peer's word. A reply with a negative size, or
/// one larger than any memory, is refused when it is read; sums of sizes saturate instead of
/// trapping (a service that answered two entries of 2^63 - 1 bytes killed the agent with SIGILL).
@Suite struct PeerSizeTests {
    /// A `warn` reply whose first entry's `member` is `value`.
    static func releaseReply(_ member: String, _ value: String, entries: Int = 1) -> String {
        var entry: [String: String] = [
            "consumer": #""cache""#, "tier": #""caches""#, "bytesBefore": "10", "bytesAfter": "0", "bytesFreed": "10", "durationMicroseconds": "1",
            "bytesInUse": "0",
        ]
        entry[member] = value
        let object = "{" + entry.sorted { $0.key < $1.key }.map { #""\#($0.key)":\#($0.value)"# }.joined(separator: ",") + "}"
        let list = Array(repeating: object, count: entries).joined(separator: ",")
        return
            #"{"ok":true,"request":"warn","pid":1,"report":{"level":"warning","targetBytes":0,"entries":[\#(list)],"trimmedHeap":false,"durationMicroseconds":1}}"#
    }

    @Test(arguments: [
        ("bytesFreed", "-1", "negative"), ("bytesBefore", "-4096", "negative"), ("bytesAfter", "-1", "negative"), ("bytesInUse", "-1", "negative"),
        ("bytesFreed", "9223372036854775807", "more than any memory"), ("bytesBefore", "\(1 << 60)", "more than any memory"),
    ])
    func aReleaseReplyWithANegativeOrAbsurdSizeIsRefusedNamingIt(member: String, value: String, says: String) throws {
        let line = Self.releaseReply(member, value)
        let error = #expect(throws: ControlError.self) { try ControlReply(line: Array(line.utf8)) }
        #expect(error?.code == .malformedReply)
        #expect(error?.message.contains(#""\#(member)" is \#(value)"#) == true, "\(error?.message ?? "")")
        #expect(error?.message.contains(says) == true, "\(error?.message ?? "")")
    }

    @Test(arguments: [
        #""consumers":[{"name":"cache","tier":"caches","footprintBytes":-5}]"#,
        #""consumers":[{"name":"cache","tier":"caches","footprintBytes":9223372036854775807}]"#,
        #""consumers":[{"name":"pool","tier":"caches","footprintBytes":5,"inUseBytes":-1}]"#,
        #""consumers":[],"releasedBytesByTier":{"caches":-1}"#,
        #""consumers":[],"releasedBytesByConsumer":{"cache":9223372036854775807}"#,
    ])
    func aStatusReplyWithANegativeOrAbsurdSizeIsRefused(members: String) throws {
        let line = #"{"ok":true,"request":"status","pid":7,"level":"normal","usageBytes":1,"limitBytes":2,"cgroupPath":"/x",\#(members)}"#
        let error = #expect(throws: ControlError.self) { try ControlReply(line: Array(line.utf8)) }
        #expect(error?.code == .malformedReply)
        #expect(error?.message.contains("negative") == true || error?.message.contains("more than any memory") == true, "\(error?.message ?? "")")
    }

    /// A consumer's bytes in use cross the wire when it reports them, and are absent (not 0)
    /// when it does not, or when the endpoint predates them.
    @Test func aConsumersBytesInUseCrossTheWireOnlyWhenItSays() throws {
        var status = ControlStatus(
            pid: 7, level: .warning, usageBytes: 1, limitBytes: 2, cgroupPath: "/x",
            consumers: [
                .init(name: "pool", tier: "caches", footprintBytes: 40 << 20, inUseBytes: 32 << 20),
                .init(name: "cache", tier: "caches", footprintBytes: 8 << 20),
            ])
        status.isMemoryExhausted = false
        let line = ControlReply.status(status).line
        #expect(line.contains(#""inUseBytes":33554432"#) && line.components(separatedBy: "inUseBytes").count == 2, "\(line)")
        guard case .status(let read) = try ControlReply(line: Array(line.utf8)) else {
            Issue.record("not a status reply")
            return
        }
        #expect(read.consumers.map(\.inUseBytes) == [32 << 20, nil])
        let older =
            #"{"ok":true,"request":"status","pid":7,"level":"normal","usageBytes":1,"limitBytes":2,"cgroupPath":"/x","consumers":[{"name":"c","tier":"caches","footprintBytes":3}]}"#
        guard case .status(let old) = try ControlReply(line: Array(older.utf8)) else {
            Issue.record("not a status reply")
            return
        }
        #expect(old.consumers.first?.inUseBytes == nil)
    }

    @Test func aPlausibleReplyStillReads() throws {
        let line = Self.releaseReply("bytesFreed", "\(1 << 57)")  // 128 PiB: the most any process can map
        guard case .released(_, _, let report) = try ControlReply(line: Array(line.utf8)) else {
            Issue.record("not a release reply")
            return
        }
        #expect(report.freedBytes == 1 << 57)
        let everything =
            #"{"ok":true,"request":"warn","pid":1,"report":{"level":"warning","targetBytes":9223372036854775807,"entries":[],"trimmedHeap":false,"durationMicroseconds":1}}"#
        guard case .released(_, _, let whole) = try ControlReply(line: Array(everything.utf8)) else {
            Issue.record("not a release reply")
            return
        }
        #expect(whole.targetBytes == .max, "a target of Int.max is \"everything the level allows\", not an absurd size")
    }

    @Test func theFreedBytesOfEntriesNearIntMaxSaturate() {
        let huge = ReleaseReport.Entry(consumer: "liar", tier: .caches, bytesBefore: .max, bytesAfter: 0, bytesFreed: .max, duration: .zero)
        let report = ReleaseReport(level: .warning, targetBytes: 1, entries: [huge, huge, huge], trimmedHeap: false, duration: .zero)
        #expect(report.freedBytes == .max)
        #expect(report.metTarget)
        let negative = ReleaseReport.Entry(consumer: "odd", tier: .caches, bytesBefore: 0, bytesAfter: 0, bytesFreed: .min, duration: .zero)
        #expect(ReleaseReport(level: .warning, targetBytes: 1, entries: [negative, negative], trimmedHeap: false, duration: .zero).freedBytes == .min)
        var totals = ReleaseTotals()
        totals.add(report)
        totals.add(report)
        #expect(totals.freedBytesByTier == ["caches": .max] && totals.freedBytesByConsumer == ["liar": .max])
    }

    @Test func anEndpointThatAnswersWithAnAbsurdReportIsRefusedByTheClientNotACrash() throws {
        let directory = try FileSystem.makeUniqueDirectory(template: NSTemporaryDirectory() + "memwarn-peer-XXXXXX")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let socket = directory + "/1.sock"
        let reply = Self.releaseReply("bytesFreed", "9223372036854775807", entries: 2)
        let endpoint = try ScriptedEndpoint(at: socket, reply: reply)
        let error = #expect(throws: ControlError.self) { try ControlClient.send(.warn(level: .warning), to: socket) }
        #expect(error?.code == .malformedReply && error?.message.contains(#""bytesFreed" is 9223372036854775807"#) == true, "\(String(describing: error))")
        #expect(endpoint.answered())
    }
}

/// An endpoint on a real Unix socket that reads one request and answers it with a line of the
/// test's, then closes (a peer that says what it likes).
final class ScriptedEndpoint: Sendable {
    private let done = ConditionLock(false)

    init(at path: String, reply: String) throws {
        let listener = try FileDescriptor.unixStreamSocket(nonBlocking: false)
        try listener.bind(to: UnixSocketAddress(path: path))
        try listener.listen(backlog: 1)
        let raw = listener.take()
        let done = self.done
        try SystemThread.start(name: "scripted-end") {
            let listener = FileDescriptor(adopting: raw)
            defer { done.withLock { $0 = true } }
            guard let connection = try? listener.acceptConnection(), (try? connection.waitUntilReady(timeout: .seconds(10))) == true else { return }
            var request = [UInt8](repeating: 0, count: 4096)
            _ = try? connection.receive(into: &request)
            _ = try? connection.send(ArraySlice((reply + "\n").utf8))
        }
    }

    /// Whether it answered within 10 s.
    func answered() -> Bool {
        done.wait(timeout: .seconds(10)) { $0 ? true : nil } ?? false
    }
}
