import Foundation

/// `memwarn-demo [--duration SECONDS] [--no-memwarn] [--cache-budget MIB] [--data-dir DIR]`.
struct DemoOptions: Sendable {
    /// How long the load runs before the final verification.
    var duration: Duration = .seconds(60)
    /// Run without memwarn (no monitor, no releases, no suspension): the baseline.
    var memwarnEnabled = true
    /// A fixed bound on the render cache's bytes (`totalCostLimit`), as a user without memwarn
    /// would set; `nil`: the cache never evicts on its own.
    var cacheBudgetBytes: Int?
    /// Where sessions save their state and media files are generated: given (it must be a
    /// directory of this user's that nobody else may write to, or not exist yet), or a fresh
    /// private one under `$TMPDIR` (`mkdtemp`) when `nil`.
    var dataDirectory: String?

    static let usage = """
        usage: memwarn-demo [--duration SECONDS] [--no-memwarn] [--cache-budget MIB] [--data-dir DIR]
        A memory-hungry service: a render cache that grows without bound, media decoded from
        files it generates, a connection pool, and user sessions (units) that go to the
        background, are suspended, and come back. One JSON event a line on stdout; the last
        line is the summary, with the writes acknowledged, verified and lost. --cache-budget
        bounds the render cache (a fixed budget, as without memwarn). Its files go in
        --data-dir (a folder of yours that nobody else may write to, made if missing) or else a
        fresh private folder under $TMPDIR, removed at the end.
        """

    struct UsageError: Error, CustomStringConvertible { var description: String }

    static func parse(_ arguments: [String]) throws -> DemoOptions {
        var options = DemoOptions()
        var rest = arguments[...]
        while let argument = rest.popFirst() {
            switch argument {
            case "--no-memwarn": options.memwarnEnabled = false
            case "--duration":
                guard let text = rest.popFirst(), let seconds = Double(text.hasSuffix("s") ? String(text.dropLast()) : text), seconds > 0 else {
                    throw UsageError(description: "--duration takes a number of seconds, such as 60 or 60s")
                }
                options.duration = .milliseconds(Int64(seconds * 1_000))
            case "--cache-budget":
                guard let text = rest.popFirst(), let mebibytes = Int(text), mebibytes > 0, mebibytes <= 1 << 20 else {
                    throw UsageError(description: "--cache-budget takes a size in MiB, from 1 to 1048576")
                }
                options.cacheBudgetBytes = mebibytes << 20
            case "--data-dir":
                guard let directory = rest.popFirst() else { throw UsageError(description: "--data-dir takes a directory") }
                options.dataDirectory = directory
            case "-h", "--help": throw UsageError(description: usage)
            default: throw UsageError(description: "unknown argument \"\(argument)\"\n\(usage)")
            }
        }
        return options
    }
}
