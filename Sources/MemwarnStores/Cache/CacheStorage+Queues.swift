/// The two FIFO queues of ``CacheStorage``: doubly linked lists threaded through its nodes.
extension CacheStorage {
    /// Appends the node in `slot` to the newest end of its queue (``Node/queue``).
    @inlinable
    mutating func push(_ slot: Int32) {
        let cost = nodes[Int(slot)].cost
        if nodes[Int(slot)].queue == Self.smallQueue {
            Self.push(slot, cost: cost, onto: &small, in: &nodes)
        } else {
            Self.push(slot, cost: cost, onto: &main, in: &nodes)
        }
    }

    @inlinable
    static func push(_ slot: Int32, cost: Int, onto queue: inout Queue, in nodes: inout SlotBuffer<Node>) {
        nodes[Int(slot)].previous = queue.newest
        nodes[Int(slot)].next = -1
        if queue.newest >= 0 { nodes[Int(queue.newest)].next = slot }
        queue.appendLinked(slot, cost: cost)
    }

    /// Takes the node in `slot` out of its queue.
    @inlinable
    mutating func unlink(_ slot: Int32) {
        let cost = nodes[Int(slot)].cost
        if nodes[Int(slot)].queue == Self.smallQueue {
            Self.unlink(slot, cost: cost, from: &small, in: &nodes)
        } else {
            Self.unlink(slot, cost: cost, from: &main, in: &nodes)
        }
    }

    @inlinable
    static func unlink(_ slot: Int32, cost: Int, from queue: inout Queue, in nodes: inout SlotBuffer<Node>) {
        let previous = nodes[Int(slot)].previous
        let next = nodes[Int(slot)].next
        if previous >= 0 { nodes[Int(previous)].next = next } else { queue.oldest = next }
        if next >= 0 { nodes[Int(next)].previous = previous } else { queue.newest = previous }
        queue.count -= 1
        queue.cost -= cost
    }
}
