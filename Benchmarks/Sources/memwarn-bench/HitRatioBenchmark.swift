import Foundation
import Memwarn
import MemwarnTestKit

/// Hit ratios on request traces: `DiscardableCache` (S3-FIFO) beside the LRU it used before
/// (``LRUPeer``) and Foundation's `NSCache`, each with the same cost limit, in the same run, on
/// the same traces; then the order a memory release takes, measured by the hit ratio after it.
///
/// A request reads its key; a miss stores it with its cost (``Traces/cost(of:)``). The cost
/// limit is a fraction of the bytes of all keys (0.1 %, 1 %, 10 %).
struct HitRatioBenchmark {
    var keys: Int
    var requests: Int

    static let fractions = [0.001, 0.01, 0.1]
    static let alphas = [0.6, 0.8, 0.9, 1.0, 1.2]
    /// Requests in the windows before and after the scan, and after a release.
    static let window = 50_000

    enum Peer: String, CaseIterable {
        case discardableCache = "DiscardableCache"
        case lru = "LRU"
        case nsCache = "NSCache"
    }

    /// One trace at one size: each peer's hit ratio (and around the scan, the windows').
    struct Row {
        var trace: String
        var fraction: Double
        var hitRatio: [Peer: Double] = [:]
        var beforeScan: [Peer: Double] = [:]
        var afterScan: [Peer: Double] = [:]
        var seconds: [Peer: Double] = [:]
    }

    /// A release of half the bytes, in one order: what it took and the hit ratio after it.
    struct ReleaseRow {
        var order: String
        var fraction: Double
        var entriesBefore: Int
        var entriesReleased: Int
        var bytesReleased: Int
        var hitRatioBefore: Double
        var hitRatioAfter: Double
        /// Over the first tenth of the window after the release: how fast the cache recovers.
        var hitRatioJustAfter: Double
    }

    struct Result {
        var keys: Int
        var requests: Int
        var rows: [Row]
        var releases: [ReleaseRow]
    }

    func run(progress: (String) -> Void) -> Result {
        let totalBytes = (0..<Int32(keys)).reduce(0) { $0 + Traces.cost(of: $1) }
        var rows: [Row] = []
        var traces: [(name: String, trace: [Int32], scan: (start: Int, end: Int)?)] = []
        for alpha in Self.alphas {
            traces.append(("zipf \(fixed(alpha, 1))", Traces.zipf(keys: keys, alpha: alpha, length: requests, seed: 42), nil))
        }
        let scanned = Traces.withScan(Traces.zipf(keys: keys, alpha: 0.9, length: requests, seed: 7), keys: keys)
        traces.append(("zipf 0.9 + scan", scanned.trace, (scanned.scanStart, scanned.scanEnd)))
        let numbers = (0..<Int32(2 * keys)).map { NSNumber(value: $0) }
        for (name, trace, scan) in traces {
            for fraction in Self.fractions {
                progress("\(name) at \(fixed(fraction * 100, 1)) %")
                rows.append(measure(name, trace, scan: scan, limit: Int(Double(totalBytes) * fraction), fraction: fraction, numbers: numbers))
            }
        }
        for fraction in Self.fractions {
            let limit = Int(Double(totalBytes) * fraction)
            progress("loop of 1.1 x the cache at \(fixed(fraction * 100, 1)) %")
            rows.append(measure("loop 1.1x cache", Traces.loop(bytes: limit + limit / 10, length: requests), scan: nil, limit: limit,
                                fraction: fraction, numbers: numbers))
        }
        var releases: [ReleaseRow] = []
        let zipf = traces.first { $0.name == "zipf 0.9" }!.trace
        for fraction in [0.01, 0.1] {
            for order in [DiscardableCacheReleaseOrder.balanced, .largestFirst, .coldestFirst] {
                progress("release of half the bytes, \(order), at \(fixed(fraction * 100, 1)) %")
                releases.append(measureRelease(zipf, order: order, limit: Int(Double(totalBytes) * fraction), fraction: fraction))
            }
        }
        return Result(keys: keys, requests: requests, rows: rows, releases: releases)
    }

    private func measure(_ name: String, _ trace: [Int32], scan: (start: Int, end: Int)?, limit: Int, fraction: Double, numbers: [NSNumber]) -> Row {
        var row = Row(trace: name, fraction: fraction)
        for peer in Peer.allCases {
            let start = ChildProcess.monotonicNanoseconds()
            let hits: [Bool]
            switch peer {
            case .discardableCache:
                let cache = DiscardableCache<Int32, Int32>(coordinator: nil)
                cache.totalCostLimit = limit
                hits = trace.map { key in
                    if cache.object(forKey: key) != nil { return true }
                    cache.setObject(key, forKey: key, cost: Traces.cost(of: key))
                    return false
                }
            case .lru:
                var lru = LRUPeer(costLimit: limit)
                hits = trace.map { key in
                    if lru.read(key) { return true }
                    lru.store(key, cost: Traces.cost(of: key))
                    return false
                }
            case .nsCache:
                let cache = NSCache<NSNumber, NSNumber>()
                cache.totalCostLimit = limit
                hits = trace.map { key in
                    if cache.object(forKey: numbers[Int(key)]) != nil { return true }
                    cache.setObject(numbers[Int(key)], forKey: numbers[Int(key)], cost: Traces.cost(of: key))
                    return false
                }
            }
            row.seconds[peer] = Double(ChildProcess.monotonicNanoseconds() - start) / 1e9
            row.hitRatio[peer] = Self.ratio(hits[...])
            if let scan {
                row.beforeScan[peer] = Self.ratio(hits[max(0, scan.start - Self.window)..<scan.start])
                row.afterScan[peer] = Self.ratio(hits[scan.end..<min(hits.count, scan.end + Self.window)])
            }
        }
        return row
    }

    private func measureRelease(_ trace: [Int32], order: DiscardableCacheReleaseOrder, limit: Int, fraction: Double) -> ReleaseRow {
        let cache = DiscardableCache<Int32, Int32>(coordinator: nil)
        cache.totalCostLimit = limit
        cache.releaseOrder = order
        func request(_ key: Int32) -> Bool {
            if cache.object(forKey: key) != nil { return true }
            cache.setObject(key, forKey: key, cost: Traces.cost(of: key))
            return false
        }
        let middle = trace.count / 2
        let warm = trace[..<middle].map(request)
        let entriesBefore = cache.count
        let bytesReleased = cache.release(ReleaseRequest(level: .warning, tier: .caches, targetBytes: cache.totalCost / 2))
        let entriesReleased = entriesBefore - cache.count
        let after = trace[middle..<min(trace.count, middle + Self.window)].map(request)
        return ReleaseRow(order: order.description, fraction: fraction, entriesBefore: entriesBefore, entriesReleased: entriesReleased,
                          bytesReleased: bytesReleased, hitRatioBefore: Self.ratio(warm[(middle - Self.window)...]),
                          hitRatioAfter: Self.ratio(after[...]), hitRatioJustAfter: Self.ratio(after[..<(Self.window / 10)]))
    }

    static func ratio(_ hits: ArraySlice<Bool>) -> Double {
        hits.isEmpty ? 0 : Double(hits.reduce(0) { $0 + ($1 ? 1 : 0) }) / Double(hits.count)
    }
}

extension HitRatioBenchmark.Result {
    /// The goals: at least LRU's hits on every trace; 1.3 times LRU's on Zipf 0.9 at 0.1 % and
    /// 1 %; after a one-time scan, the hot set's hits at least 90 % of what they were before it.
    struct Goal {
        var name: String
        var met: Bool
    }

    var goals: [Goal] {
        var goals: [Goal] = []
        let atLeastLRU = rows.filter { ($0.hitRatio[.discardableCache] ?? 0) + 1e-9 < ($0.hitRatio[.lru] ?? 0) }
        goals.append(Goal(name: "hit ratio >= LRU's on every trace" + (atLeastLRU.isEmpty ? "" : " (below on: \(atLeastLRU.map { "\($0.trace) @\(fixed($0.fraction * 100, 1))%" }.joined(separator: ", ")))"),
                          met: atLeastLRU.isEmpty))
        for fraction in [0.001, 0.01] {
            if let row = rows.first(where: { $0.trace == "zipf 0.9" && $0.fraction == fraction }) {
                let ratio = (row.hitRatio[.discardableCache] ?? 0) / max(row.hitRatio[.lru] ?? 0, 1e-9)
                goals.append(Goal(name: "zipf 0.9 @\(fixed(fraction * 100, 1))%: \(fixed(ratio, 2))x LRU's hit ratio (>= 1.3x)", met: ratio >= 1.3))
            }
        }
        for row in rows where !row.beforeScan.isEmpty {
            let before = row.beforeScan[.discardableCache] ?? 0, after = row.afterScan[.discardableCache] ?? 0
            goals.append(Goal(name: "scan @\(fixed(row.fraction * 100, 1))%: hot set's hits after the scan \(fixed(after * 100, 1)) % vs \(fixed(before * 100, 1)) % before (>= 90 % of it)",
                              met: after >= 0.9 * before))
        }
        return goals
    }

    var report: String {
        func percent(_ value: Double?) -> String { value.map { fixed($0 * 100, 2) } ?? "n/a" }
        // A peer with no hit at all has no ratio: "(peer 0)" says so, where a division would print a huge number.
        func times(_ ours: Double, _ peer: Double?) -> String {
            guard let peer, peer > 0 else { return ours > 0 ? "(peer 0)" : "n/a" }
            return fixed(ours / peer, 2) + "x"
        }
        var header = ["trace", "size"]
        for peer in HitRatioBenchmark.Peer.allCases { header.append(peer.rawValue + " %") }
        header += ["vs LRU", "vs NSCache", "before/after scan (DC, LRU, NSCache) %"]
        var lines = [header]
        for row in rows {
            let ours = row.hitRatio[.discardableCache] ?? 0
            var line = [row.trace, fixed(row.fraction * 100, 1) + " %"]
            for peer in HitRatioBenchmark.Peer.allCases { line.append(percent(row.hitRatio[peer])) }
            line.append(times(ours, row.hitRatio[.lru]))
            line.append(times(ours, row.hitRatio[.nsCache]))
            line.append(row.beforeScan.isEmpty ? "" : HitRatioBenchmark.Peer.allCases.map { "\(percent(row.beforeScan[$0]))->\(percent(row.afterScan[$0]))" }.joined(separator: ", "))
            lines.append(line)
        }
        var releaseLines = [["release of half the bytes", "size", "entries", "released", "MiB released", "hits before %", "after %", "first tenth after %"]]
        for release in releases {
            releaseLines.append([release.order, fixed(release.fraction * 100, 1) + " %", String(release.entriesBefore), String(release.entriesReleased),
                                 fixed(Double(release.bytesReleased) / 1_048_576, 2), percent(release.hitRatioBefore), percent(release.hitRatioAfter),
                                 percent(release.hitRatioJustAfter)])
        }
        let seconds = rows.reduce(into: [HitRatioBenchmark.Peer: Double]()) { totals, row in
            for (peer, value) in row.seconds { totals[peer, default: 0] += value }
        }
        return """
        hits: \(requests) requests a trace over \(keys) keys (a key's cost: 64 to 8,255 bytes, fixed); a miss stores the key;
        each cache limited to a fraction of all keys' bytes (totalCostLimit); DiscardableCache (S3-FIFO), the LRU it used before,
        and Foundation's NSCache, on the same traces in this run; the scan: \(keys) keys seen once, in the middle of a Zipf 0.9 trace,
        its hot set's hits over the \(HitRatioBenchmark.window) requests before and after it

        \(table(lines))

        release: Zipf 0.9, the first half of the trace, then a release of half the cache's bytes in each order, then
        the hit ratio over the next \(HitRatioBenchmark.window) requests (and their first tenth)

        \(table(releaseLines))

        \(goals.map { "goal: \($0.name): \($0.met ? "met" : "NOT met")" }.joined(separator: "\n"))
        time: \(HitRatioBenchmark.Peer.allCases.map { "\($0.rawValue) \(fixed(seconds[$0] ?? 0, 1)) s" }.joined(separator: ", "))
        """
    }

    var json: JSON {
        .object([
            ("keys", .number(keys)),
            ("requests", .number(requests)),
            ("rows", .array(rows.map { row in
                .object([("trace", .string(row.trace)), ("fraction", .double(row.fraction, digits: 4))]
                        + HitRatioBenchmark.Peer.allCases.map { ($0.rawValue, .double(row.hitRatio[$0] ?? 0, digits: 5)) }
                        + (row.beforeScan.isEmpty ? [] : [
                            ("before_scan", .object(HitRatioBenchmark.Peer.allCases.map { ($0.rawValue, .double(row.beforeScan[$0] ?? 0, digits: 5)) })),
                            ("after_scan", .object(HitRatioBenchmark.Peer.allCases.map { ($0.rawValue, .double(row.afterScan[$0] ?? 0, digits: 5)) })),
                        ]))
            })),
            ("releases", .array(releases.map { release in
                .object([("order", .string(release.order)), ("fraction", .double(release.fraction, digits: 4)),
                         ("entries_before", .number(release.entriesBefore)), ("entries_released", .number(release.entriesReleased)),
                         ("bytes_released", .number(release.bytesReleased)), ("hit_ratio_before", .double(release.hitRatioBefore, digits: 5)),
                         ("hit_ratio_after", .double(release.hitRatioAfter, digits: 5)),
                         ("hit_ratio_just_after", .double(release.hitRatioJustAfter, digits: 5))])
            })),
            ("goals", .array(goals.map { .object([("goal", .string($0.name)), ("met", .bool($0.met))]) })),
        ])
    }
}
