#if canImport(Glibc)
import Glibc
#endif

/// `memwarn-bench latency|idle|cache|hits|release|growth|armed|agent`: see README.md.
@main
struct MemwarnBench {
    static let usage = """
    usage: memwarn-bench latency [--crossings N] [--above KIB] [--json]   (N defaults to 200; the final step ends KIB past
                                                            the mark, 512 by default: smaller leaves more crossings
                                                            unreported by the kernel, for the guard bands)
           memwarn-bench idle [--seconds S] [--inactive-page-cache count|ignore] [--json]   (S defaults to 60)
           memwarn-bench armed [--runs N] [--json]          (time from a service's exec to its monitor armed, as root
                                                            and as nobody; N defaults to 20)
           memwarn-bench cache [--sizes N,N,...] [--json]   (sizes default to 20000,100000,1000000;
                                                            20000, NSCache's reference size, is always run;
                                                            then hot-key reads from 1 and 2 threads)
           memwarn-bench hits [--keys K] [--requests N] [--json]  (hit ratios on Zipf, scan and loop traces: DiscardableCache,
                                                            the LRU it used before and NSCache; K defaults to 100000, N to 1000000)
           memwarn-bench release [--json]                   (1 GiB in 10 DiscardableCaches, released; then the
                                                            same in a child with its heap on huge pages)
           memwarn-bench growth [--peers events,sampling,poll-1s,poll-100ms] [--limits 128] [--rates 10,25,50,100,200,400,800]
                                [--total MIB] [--repeats N] [--json]
                                                            (the README's service under memwarn run, on each peer's path:
                                                            v1 events as root, adaptive sampling and fixed polls as nobody;
                                                            also rise-only and poller; total defaults to 512, N to 1)
           memwarn-bench agent [--repeat N] [--budget S] [--json]
                                                            (services sharing a limited parent: the node agent, each service
                                                            releasing on its own, and nobody answering the parent, taking turns;
                                                            N defaults to 3; no trial starts after S seconds, 600 by default)

    latency, idle, growth, armed and agent need root and a cgroup v1 memory hierarchy, and find
    memwarn-hog, memwarn and memwarn-growth-probe through MEMWARN_HOG, MEMWARN_CLI and
    MEMWARN_GROWTH_PROBE (the run script builds and sets them; agent builds the last two itself when
    they are unset); cache, hits and release need neither. Build in release. With --json
    the table goes to stderr and stdout holds one JSON object.
    """

    static func main() async {
        var arguments = Array(CommandLine.arguments.dropFirst())
        let json = arguments.contains("--json")
        let isHugePageHeapChild = arguments.contains(HugePageHeapRun.childFlag)
        arguments.removeAll { $0 == "--json" || $0 == HugePageHeapRun.childFlag }
        do {
            guard let command = arguments.first else { throw UsageError("no benchmark named") }
            let options = try parseOptions(Array(arguments.dropFirst()))
            let progress = { (step: String) in if isatty(2) == 1 { writeError(step + "\n") } }
            switch command {
            case "latency":
                let crossings = try options.integer("--crossings", default: 200)
                guard crossings >= 1 else { throw UsageError("--crossings must be at least 1") }
                let above = try options.integer("--above", default: LatencyBenchmark.defaultAboveMark >> 10)
                guard above >= 4 else { throw UsageError("--above must be at least 4 (KiB: a page)") }
                let result = try await LatencyBenchmark(crossings: crossings, aboveMark: above << 10, cli: try cliPath()).run { done in
                    if isatty(2) == 1 && (done % 20 == 0 || done == crossings) { writeError("\rcrossings: \(done)/\(crossings)" + (done == crossings ? "\n" : "")) }
                }
                emit(report: result.report, json: json ? result.json : nil)
            case "idle":
                let seconds = try options.number("--seconds", default: 60)
                guard seconds > 0 else { throw UsageError("--seconds must be positive") }
                if isatty(2) == 1 { writeError("idling for \(fixed(seconds, 1)) s...\n") }
                let pageCache = options.values["--inactive-page-cache"] ?? "count"
                guard ["count", "ignore"].contains(pageCache) else { throw UsageError("--inactive-page-cache must be count or ignore") }
                var benchmark = IdleBenchmark(seconds: seconds, cli: try cliPath())
                benchmark.countsInactivePageCache = pageCache == "count"
                let result = try await benchmark.run()
                emit(report: result.report, json: json ? result.json : nil)
            case "armed":
                let runs = try options.integer("--runs", default: 20)
                guard runs >= 1 else { throw UsageError("--runs must be at least 1") }
                let benchmark = try ArmedBenchmark(runs: runs)
                var result = try benchmark.run(progress: progress)
                result.registrations = try await benchmark.registrations()
                emit(report: result.report, json: json ? result.json : nil)
            case "cache":
                let sizes = try options.integers("--sizes", default: [20_000, 100_000, 1_000_000])
                guard sizes.allSatisfy({ $0 >= 1 }) else { throw UsageError("--sizes must all be at least 1") }
                let result = try CacheBenchmark(sizes: sizes).run(progress: progress)
                let hotReads = try HotReadBenchmark().run(progress: progress)
                var combined = result.json
                if case .object(let fields) = combined { combined = .object(fields + [("hot_reads", hotReads.json)]) }
                emit(report: result.report + "\n\n" + hotReads.report, json: json ? combined : nil)
            case "hits":
                let keys = try options.integer("--keys", default: 100_000)
                let requests = try options.integer("--requests", default: 1_000_000)
                guard keys >= 1_000, requests >= 4 * HitRatioBenchmark.window else {
                    throw UsageError("--keys must be at least 1000 and --requests at least \(4 * HitRatioBenchmark.window)")
                }
                let result = HitRatioBenchmark(keys: keys, requests: requests).run(progress: progress)
                emit(report: result.report, json: json ? result.json : nil)
            case "release":
                // The huge-page heap child measures malloc's heap, so it runs [UInt8] values only.
                let result = try ReleaseBenchmark(values: isHugePageHeapChild ? [.arrays] : ReleasedValues.allCases).run(progress: progress)
                if isHugePageHeapChild {
                    emit(report: result.report, json: result.json)
                    break
                }
                progress("floors: munmap of 1 GiB on 4 KiB and 2 MiB pages; malloc/free of the same sizes in C")
                let floor = try KernelReturnFloor.measure(runs: ReleaseBenchmark.runs, sizes: ReleaseBenchmark.entrySizes(), trim: mallocTrim())
                progress("the same release with the heap on huge pages (a child process)")
                let comparison = ReleaseComparison(defaultHeap: result, hugePageHeap: try HugePageHeapRun.run(), floor: floor)
                emit(report: comparison.report, json: json ? comparison.json : nil)
            case "growth":
                let repeats = try options.integer("--repeats", default: 1)
                let totalMiB = try options.integer("--total", default: 512)
                let limits = try options.integers("--limits", default: [128])
                let rates = try options.integers("--rates", default: [10, 25, 50, 100, 200, 400, 800])
                let peerNames = options.values["--peers"].map { $0.split(separator: ",").map(String.init) } ?? GrowthBenchmark.Peer.defaultNames
                let peers = try peerNames.map { name throws(UsageError) in
                    guard let peer = GrowthBenchmark.Peer.named(name) else {
                        throw UsageError("unknown peer \"\(name)\" (known: \(GrowthBenchmark.Peer.all.map(\.name).joined(separator: ", ")))")
                    }
                    return peer
                }
                guard repeats >= 1, totalMiB >= 1 else { throw UsageError("--repeats and --total must be at least 1") }
                guard limits.allSatisfy({ $0 >= 1 }), rates.allSatisfy({ $0 >= 1 }) else { throw UsageError("--limits and --rates must all be at least 1") }
                let benchmark = try GrowthBenchmark(peers: peers, limitsMiB: limits, rates: rates, totalMiB: totalMiB, repeats: repeats)
                let result = try benchmark.run { step in writeError(step + "\n") }
                emit(report: result.report, json: json ? result.json : nil)
            case "agent":
                let repeats = try options.integer("--repeat", default: 3)
                let budget = try options.number("--budget", default: 600)
                guard repeats >= 1 else { throw UsageError("--repeat must be at least 1") }
                guard budget > 0 else { throw UsageError("--budget must be positive") }
                let result = try await AgentBenchmark(repeats: repeats, budgetSeconds: budget).run { step in writeError(step + "\n") }
                emit(report: result.report, json: json ? result.json : nil)
            case "-h", "--help", "help":
                print(usage)
            default:
                throw UsageError("unknown benchmark \"\(command)\"")
            }
        } catch let error as UsageError {
            writeError("memwarn-bench: \(error.message)\n\n\(usage)\n")
            exit(2)
        } catch {
            writeError("memwarn-bench: \(error)\n")
            exit(1)
        }
    }

    /// The `memwarn` executable (`MEMWARN_CLI`), for the peers that run it as nobody.
    static func cliPath() throws -> String {
        guard let path = getenv("MEMWARN_CLI").map({ String(cString: $0) }), !path.isEmpty, access(path, X_OK) == 0 else {
            throw BenchmarkError("this benchmark runs memwarn as nobody: set MEMWARN_CLI to a release build of it (Benchmarks/run does)")
        }
        return path
    }

    /// The table on stdout; with JSON, the table on stderr and the object alone on stdout.
    static func emit(report: String, json: JSON?) {
        if let json {
            writeError(report + "\n")
            print(json.text)
        } else {
            print(report)
        }
    }

    struct Options {
        var values: [String: String]
        func integer(_ name: String, default value: Int) throws(UsageError) -> Int {
            guard let text = values[name] else { return value }
            guard let number = Int(text) else { throw UsageError("\(name) expects a whole number, got \"\(text)\"") }
            return number
        }
        /// A comma-separated list of whole numbers.
        func integers(_ name: String, default value: [Int]) throws(UsageError) -> [Int] {
            guard let text = values[name] else { return value }
            var numbers: [Int] = []
            for item in text.split(separator: ",", omittingEmptySubsequences: false) {
                guard let number = Int(item.filter { $0 != "_" && $0 != " " }) else { throw UsageError("\(name) expects whole numbers separated by commas, got \"\(text)\"") }
                numbers.append(number)
            }
            return numbers
        }
        func number(_ name: String, default value: Double) throws(UsageError) -> Double {
            guard let text = values[name] else { return value }
            guard let number = Double(text), number.isFinite else { throw UsageError("\(name) expects a number, got \"\(text)\"") }
            return number
        }
    }

    /// `--name value` and `--name=value` pairs.
    static func parseOptions(_ arguments: [String]) throws(UsageError) -> Options {
        var values: [String: String] = [:]
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            guard argument.hasPrefix("--") else { throw UsageError("unexpected argument \"\(argument)\"") }
            if let equals = argument.firstIndex(of: "=") {
                values[String(argument[..<equals])] = String(argument[argument.index(after: equals)...])
            } else {
                guard index + 1 < arguments.count else { throw UsageError("\(argument) needs a value") }
                values[argument] = arguments[index + 1]
                index += 1
            }
            index += 1
        }
        let known: Set = ["--crossings", "--seconds", "--sizes", "--limits", "--rates", "--total", "--repeats", "--keys", "--requests", "--peers", "--above",
                          "--position", "--runs", "--repeat", "--budget", "--inactive-page-cache"]
        if let unknown = values.keys.sorted().first(where: { !known.contains($0) }) { throw UsageError("unknown option \(unknown)") }
        return Options(values: values)
    }
}

struct UsageError: Error {
    var message: String
    init(_ message: String) { self.message = message }
}

/// Writes to stderr unbuffered.
func writeError(_ text: String) {
    let bytes = Array(text.utf8)
    _ = bytes.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
}
