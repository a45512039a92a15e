import Configuration
import PostgresNIO

/// The service's settings, from swift-configuration (here: environment variables; a file
/// provider added to the reader would do as well).
struct Settings {
    var database: PostgresConnection.Configuration
    /// Jobs the worker processes a second (`SERVICE_DRAIN_RATE`, 40).
    var drainRate: Int
    /// The size of a rendered report (`SERVICE_RENDER_KIB`, 256).
    var renderBytes: Int
    /// The `Retry-After` of a shed request, in seconds (`SERVICE_RETRY_AFTER`, 5).
    var retryAfterSeconds: Int

    struct Invalid: Error, CustomStringConvertible { var description: String }

    init(config: ConfigReader) throws {
        database = PostgresConnection.Configuration(
            host: config.string(forKey: "database.host", default: "127.0.0.1"),
            port: config.int(forKey: "database.port", default: 5432),
            username: config.string(forKey: "database.user", default: "postgres"),
            password: config.string(forKey: "database.password"),
            database: config.string(forKey: "database.name", default: "reports"),
            tls: .disable)
        drainRate = try Self.number(config, "service.drain_rate", default: 40, in: 1...100_000)
        renderBytes = try Self.number(config, "service.render_kib", default: 256, in: 4...65536) << 10
        retryAfterSeconds = try Self.number(config, "service.retry_after", default: 5, in: 1...3600)
    }

    private static func number(_ config: ConfigReader, _ key: String, default value: Int, in range: ClosedRange<Int>) throws -> Int {
        let number = config.int(forKey: ConfigKey(key), default: value)
        guard range.contains(number) else {
            throw Invalid(description: "\(key) takes a whole number in \(range.lowerBound)...\(range.upperBound), not \(number)")
        }
        return number
    }
}
