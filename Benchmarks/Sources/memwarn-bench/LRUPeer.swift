/// Least-recently-used eviction with costs: what `DiscardableCache` did before S3-FIFO (a
/// dictionary from key to slot and the slots in one doubly linked list, the least recently used
/// evicted first while the cost limit is exceeded), kept here as the hit-ratio benchmark's peer.
/// Single-threaded, no values: the benchmark counts hits.
struct LRUPeer {
    private var index: [Int32: Int32] = [:]
    private var keys: [Int32] = []
    private var costs: [Int] = []
    private var previous: [Int32] = []
    private var next: [Int32] = []
    private var free: [Int32] = []
    private var newest: Int32 = -1
    private var oldest: Int32 = -1
    private var totalCost = 0
    let costLimit: Int

    init(costLimit: Int) { self.costLimit = costLimit }

    /// A read: whether the key was held (it becomes the most recently used).
    mutating func read(_ key: Int32) -> Bool {
        guard let slot = index[key] else { return false }
        moveToNewest(slot)
        return true
    }

    /// Stores a key with its cost as the most recently used, then evicts the least recently used
    /// while the limit is exceeded (never the key just stored while another is left).
    mutating func store(_ key: Int32, cost: Int) {
        let slot: Int32
        if let freed = free.popLast() {
            slot = freed
            keys[Int(slot)] = key
            costs[Int(slot)] = cost
        } else {
            slot = Int32(keys.count)
            keys.append(key)
            costs.append(cost)
            previous.append(-1)
            next.append(-1)
        }
        index[key] = slot
        totalCost += cost
        link(slot)
        while totalCost > costLimit && oldest >= 0 && oldest != slot { remove(oldest) }
        if totalCost > costLimit { remove(slot) }  // its own cost exceeds the limit
    }

    private mutating func remove(_ slot: Int32) {
        unlink(slot)
        index[keys[Int(slot)]] = nil
        totalCost -= costs[Int(slot)]
        free.append(slot)
    }

    private mutating func link(_ slot: Int32) {
        previous[Int(slot)] = newest
        next[Int(slot)] = -1
        if newest >= 0 { next[Int(newest)] = slot } else { oldest = slot }
        newest = slot
    }

    private mutating func unlink(_ slot: Int32) {
        let before = previous[Int(slot)], after = next[Int(slot)]
        if before >= 0 { next[Int(before)] = after } else { oldest = after }
        if after >= 0 { previous[Int(after)] = before } else { newest = before }
    }

    private mutating func moveToNewest(_ slot: Int32) {
        guard slot != newest else { return }
        unlink(slot)
        link(slot)
    }
}
