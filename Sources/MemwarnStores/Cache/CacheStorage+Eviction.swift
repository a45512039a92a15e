/// The eviction policy of ``CacheStorage``: S3-FIFO's choice of the next entry to evict (see
/// the type's documentation).
extension CacheStorage {
    /// Whether a limit is exceeded.
    @inlinable
    var isOverLimits: Bool {
        (countLimit > 0 && index.count > countLimit) || (totalCostLimit > 0 && totalCost > totalCostLimit)
    }

    /// The small queue's share of each limit, in hundredths: 5 %.
    ///
    /// With the paper's choices (a 10 % small queue, a ghost remembering as many keys as the
    /// cache holds) the cache kept 1.30× LRU's hits on Zipf 0.9 at a size of 1 % of the keys;
    /// with 5 % and a ghost of a tenth, 1.35×, and no trace of `Benchmarks/run hits` lost.
    @inlinable
    static var smallSharePercent: Int { 5 }

    /// How many evicted keys the ghost remembers, in hundredths of the entries held: a tenth
    /// (see ``smallSharePercent``).
    @inlinable
    static var ghostPercent: Int { 10 }

    /// Whether the small queue holds more than its share of a limit (count or cost: the cost
    /// limit makes the queues' shares shares of bytes); `costLimit` is the cost evicted down to
    /// (``totalCostLimit``, or a release's bound).
    @inlinable
    func smallIsOverItsShare(costLimit: Int) -> Bool {
        (countLimit > 0 && small.count > max(1, countLimit * Self.smallSharePercent / 100))
            || (costLimit > 0 && small.cost > costLimit / 100 * Self.smallSharePercent)
    }

    /// Evicts in the policy's order while a limit is exceeded, sparing the entry in `protected`
    /// while another can go.
    @inlinable
    mutating func evictOverLimits(protecting protected: Int32 = -1) -> [Value] {
        var evicted: [Value] = []
        while isOverLimits {
            let victim = nextVictim(sparing: protected, costLimit: totalCostLimit)
            guard victim >= 0 else { break }
            evicted.append(evict(victim, remembering: victim != protected))
        }
        return evicted
    }

    /// Removes the policy's victim; a key evicted from the small queue is remembered by the ghost
    /// when `remembering` (so that it enters the main queue if it comes back soon).
    @inlinable
    mutating func evict(_ victim: Int32, remembering: Bool) -> Value {
        if remembering, nodes[Int(victim)].queue == Self.smallQueue, let key = nodes[Int(victim)].key {
            ghost.fit(index.count * Self.ghostPercent / 100)
            ghost.insert(key.hashValue)
        }
        return remove(victim)
    }

    /// The next entry to evict, after moving the entries the policy keeps: S3-FIFO, the small
    /// queue's share taken of `costLimit`. `spared` is chosen only when it is the last entry
    /// left. When `spared` is the main queue's only entry (a key back from the ghost, or set
    /// again costlier), the small queue gives the victim even under its share: going round the
    /// main queue would find only `spared`.
    ///
    /// - Complexity: O(1) amortized: an entry moves from the small queue to the main queue
    ///   once, and round the main queue at most three times between two of its reads.
    @inlinable
    mutating func nextVictim(sparing spared: Int32, costLimit: Int) -> Int32 {
        while true {
            let onlySpareLeftInSmall = small.count == 1 && small.oldest == spared
            let onlySpareLeftInMain = main.count == 1 && main.oldest == spared
            if small.count > 0 && (main.count == 0 || onlySpareLeftInMain || smallIsOverItsShare(costLimit: costLimit))
                && !(onlySpareLeftInSmall && main.count > 0)
            {
                let candidate = small.oldest
                if candidate == spared {
                    if small.count == 1 { return spared }  // alone in the cache
                    unlink(spared)  // a key set again: others go first
                    push(spared)
                    continue
                }
                if frequencies[candidate] > 0 {  // read since it came
                    unlink(candidate)
                    frequencies[candidate] = 0
                    nodes[Int(candidate)].queue = Self.mainQueue
                    push(candidate)
                    continue
                }
                return candidate
            }
            guard main.count > 0 else { return -1 }
            let candidate = main.oldest
            let reads = frequencies[candidate]
            if candidate == spared || reads > 0 {
                if candidate == spared && main.count == 1 && small.count == 0 { return spared }
                if candidate != spared { frequencies[candidate] = reads - 1 }
                unlink(candidate)
                push(candidate)
                continue
            }
            return candidate
        }
    }
}
