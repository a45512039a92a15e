extension CacheStorage {
    /// What is wrong with the structure, for tests: each queue linked both ways with its count
    /// and cost right, every entry in exactly the queue its node names and found by its key,
    /// the free slots empty, the totals and the count of discardable content matching, the cost
    /// limit kept to the lesser of the cache's own and the trim's.
    /// Empty when the storage is sound.
    ///
    /// - Complexity: O(n).
    func invariantViolations() -> [String] {
        var problems: [String] = []
        var seen = Set<Int32>()
        for (queueNumber, queue) in [(Self.smallQueue, small), (Self.mainQueue, main)] {
            let name = queueNumber == Self.smallQueue ? "small" : "main"
            var slot = queue.oldest
            var previous: Int32 = -1
            var count = 0
            var cost = 0
            while slot >= 0 {
                guard Int(slot) < nodes.count, seen.insert(slot).inserted else {
                    problems.append("\(name) queue: slot \(slot) out of range or linked twice")
                    break
                }
                let node = nodes[Int(slot)]
                if node.previous != previous { problems.append("\(name) queue: slot \(slot) links back to \(node.previous), not \(previous)") }
                if node.queue != queueNumber { problems.append("\(name) queue: slot \(slot) says it is in queue \(node.queue)") }
                if let key = node.key {
                    if index[key] != slot { problems.append("\(name) queue: slot \(slot)'s key is indexed at \(String(describing: index[key]))") }
                } else {
                    problems.append("\(name) queue: slot \(slot) has no key")
                }
                if values[Int(slot)] == nil { problems.append("\(name) queue: slot \(slot) has no value") }
                count += 1
                cost += node.cost
                previous = slot
                slot = node.next
            }
            if previous != queue.newest { problems.append("\(name) queue: ends at \(previous), its newest is \(queue.newest)") }
            if count != queue.count { problems.append("\(name) queue: \(count) entries linked, \(queue.count) counted") }
            if cost != queue.cost { problems.append("\(name) queue: cost \(cost) linked, \(queue.cost) counted") }
        }
        if seen.count != index.count { problems.append("\(seen.count) entries in the queues, \(index.count) in the index") }
        for slot in freeSlots where nodes[Int(slot)].key != nil { problems.append("free slot \(slot) holds a key") }
        if values.count != nodes.count { problems.append("\(values.count) values for \(nodes.count) slots") }
        for slot in freeSlots where values[Int(slot)] != nil { problems.append("free slot \(slot) holds a value") }
        if nodes.count != index.count + freeSlots.count { problems.append("\(nodes.count) slots, \(index.count) entries and \(freeSlots.count) free") }
        let contentCount = contents.reduce(0) { $0 + ($1 == nil ? 0 : 1) }
        if contentCount != discardableCount { problems.append("\(contentCount) contents stored, \(discardableCount) counted") }
        let keptTo = [ownCostLimit, trimCostLimit].filter { $0 > 0 }.min() ?? 0
        if totalCostLimit != keptTo { problems.append("cost limit \(totalCostLimit), not the lesser of \(ownCostLimit) and the trim's \(trimCostLimit)") }
        return problems
    }
}
