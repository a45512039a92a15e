import Logging
import Memwarn
import NIOCore
import PostgresNIO
import Synchronization

/// The service's PostgreSQL connections, lent by memwarn's `ResourcePool`.
///
/// The pool opens a connection when a query needs one and none is idle (at most
/// ``maximumConnections``), and keeps it for the next query. It is a memory consumer of tier
/// `sharedResources`: at `critical` memwarn closes idle connections, least recently used first
/// (with the pool's default retention, only those idle 10 s or more, and never the last one),
/// and the next query opens one again. `bytesPerHandle` is what one connection holds in this
/// process (its channel's buffers, the decoder's state): 128 KiB is an estimate, not measured
/// here; a connection costs the database server more.
/// At shutdown ``closeConnections()`` closes the idle connections and waits for every close.
final class Database: Sendable {
    static let maximumConnections = 8

    private let pool: ResourcePool<PostgresConnection>
    private let logger: Logger

    init(configuration: PostgresConnection.Configuration, eventLoopGroup: any EventLoopGroup, logger: Logger) {
        self.logger = logger
        let connectionIDs = Atomic(0)
        pool = ResourcePool(
            name: "postgres", bytesPerHandle: 128 << 10, maximumCount: Self.maximumConnections,
            onCloseError: { failure in logger.error("closing a database connection failed: \(failure)") },
            open: {
                let id = connectionIDs.add(1, ordering: .relaxed).newValue
                return try await PostgresConnection.connect(
                    on: eventLoopGroup.any(), configuration: configuration, id: id, logger: logger)
            },
            close: { connection in try await connection.close() })
    }

    /// The report's row: its owner, title, amount and note.
    func report(_ id: Int) async throws -> ReportRow? {
        try await pool.withResource { connection in
            let rows = try await connection.query(
                "SELECT id, owner, title, amount, note FROM reports WHERE id = \(id)", logger: logger)
            for try await (id, owner, title, amount, note) in rows.decode((Int, String, String, Int, String).self) {
                return ReportRow(id: id, owner: owner, title: title, amount: amount, note: note)
            }
            return nil
        }
    }

    /// The user's latest reports, newest first (at most `limit`).
    func reports(of owner: String, limit: Int) async throws -> [(id: Int, title: String, amount: Int)] {
        try await pool.withResource { connection in
            let rows = try await connection.query(
                "SELECT id, title, amount FROM reports WHERE owner = \(owner) ORDER BY id DESC LIMIT \(limit)",
                logger: logger)
            var reports: [(id: Int, title: String, amount: Int)] = []
            for try await (id, title, amount) in rows.decode((Int, String, Int).self) {
                reports.append((id, title, amount))
            }
            return reports
        }
    }

    /// How many reports the table holds.
    func reportCount() async throws -> Int {
        try await pool.withResource { connection in
            let rows = try await connection.query("SELECT count(*)::bigint FROM reports", logger: logger)
            for try await count in rows.decode(Int.self) { return count }
            return 0
        }
    }

    var openConnections: Int { pool.openCount }
    var idleConnections: Int { pool.idleCount }

    /// Closes the idle connections and waits for every close in flight: the last step of
    /// shutdown, once no request can borrow one.
    func closeConnections() async {
        let result = await pool.closeIdleAndWait()
        if result.succeeded {
            logger.info("closed \(result.closed) database connections")
        } else {
            logger.error("closing the database connections: \(result)")
        }
    }
}

/// One row of `reports`.
struct ReportRow: Sendable {
    var id: Int
    var owner: String
    var title: String
    var amount: Int
    var note: String
}
