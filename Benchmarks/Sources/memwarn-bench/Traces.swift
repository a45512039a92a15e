import MemwarnTestKit
#if canImport(Glibc)
import Glibc
#endif

/// The request traces of the hit-ratio benchmark: keys `0..<keys`, each with a cost of its own.
enum Traces {
    /// A key's cost in bytes: 64 to 8,255 (mean about 4 KiB), fixed per key.
    static func cost(of key: Int32) -> Int { 64 + Int((UInt64(key) &* 0x9E37_79B9_7F4A_7C15) >> 51) }

    /// `length` requests drawn from a Zipf distribution of exponent `alpha` over `keys` keys
    /// (rank r has weight 1/r^alpha), the ranks shuffled over the keys.
    static func zipf(keys: Int, alpha: Double, length: Int, seed: UInt64) -> [Int32] {
        var cumulative = [Double](repeating: 0, count: keys)
        var sum = 0.0
        for rank in 0..<keys {
            sum += 1 / pow(Double(rank + 1), alpha)
            cumulative[rank] = sum
        }
        var generator = SeededGenerator(seed: seed)
        var keysByRank = Array(0..<Int32(keys))
        keysByRank.shuffle(using: &generator)
        return (0..<length).map { _ in
            let u = Double(generator.next() >> 11) / Double(1 << 53) * sum
            var low = 0, high = keys - 1
            while low < high {
                let middle = (low + high) / 2
                if cumulative[middle] < u { low = middle + 1 } else { high = middle }
            }
            return keysByRank[low]
        }
    }

    /// `base` with a one-time scan of `keys` keys that occur nowhere else inserted at its middle.
    static func withScan(_ base: [Int32], keys: Int) -> (trace: [Int32], scanStart: Int, scanEnd: Int) {
        let middle = base.count / 2
        let scan = (0..<Int32(keys)).map { $0 + Int32(keys) }
        return (Array(base[..<middle]) + scan + Array(base[middle...]), middle, middle + keys)
    }

    /// `length` requests cycling over the first keys whose costs add up to `bytes`.
    static func loop(bytes: Int, length: Int) -> [Int32] {
        var count: Int32 = 0
        var sum = 0
        while sum < bytes {
            sum += cost(of: count)
            count += 1
        }
        return (0..<length).map { Int32($0) % count }
    }
}
