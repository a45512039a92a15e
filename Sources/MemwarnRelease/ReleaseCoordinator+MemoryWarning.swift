import MemwarnSystem

extension ReleaseCoordinator {
    /// The responders registered with a coordinator, held weakly, in registration order.
    struct WarningResponders {
        var entries: [(id: Int, entry: WeakReference<any MemoryWarningResponder>)] = []
        var nextID = 0
    }

    /// Identifies a registered responder, for ``removeWarningResponder(_:)``.
    public struct WarningResponderToken: Sendable, Hashable {
        let id: Int
    }

    /// Registers a responder, weakly: it is told of each memory warning before the release
    /// it starts (see ``MemoryWarningResponder``). Registering the same one twice returns the
    /// first token.
    ///
    /// - Parameter responder: told of each warning, until it is deallocated or removed.
    /// - Returns: a token for ``removeWarningResponder(_:)``.
    @discardableResult
    public func addWarningResponder(_ responder: any MemoryWarningResponder) -> WarningResponderToken {
        warningResponders.withLock { registry in
            registry.entries.removeAll { !$0.entry.isAlive }
            if let existing = registry.entries.first(where: { $0.entry.object === responder }) {
                return WarningResponderToken(id: existing.id)
            }
            registry.nextID += 1
            registry.entries.append((registry.nextID, .init(responder)))
            return WarningResponderToken(id: registry.nextID)
        }
    }

    /// Stops telling a responder.
    ///
    /// - Parameter token: what ``addWarningResponder(_:)`` returned.
    public func removeWarningResponder(_ token: WarningResponderToken) {
        warningResponders.withLock { $0.entries.removeAll { $0.id == token.id } }
    }

    /// The live responders, in registration order.
    var liveWarningResponders: [any MemoryWarningResponder] {
        warningResponders.withLock { registry in
            registry.entries.removeAll { $0.entry.object == nil }
            return registry.entries.compactMap(\.entry.object)
        }
    }

    /// Whether any responder is registered (a warning then waits for them).
    package var hasWarningResponders: Bool { warningResponders.withLock { registry in registry.entries.contains { $0.entry.isAlive } } }

    /// How much longer than its ``MemoryWarningResponder/memoryWarningDeadline`` a release waits
    /// for a responder to return: a responder that keeps its deadline (cuts off what it waits
    /// for, as `LifeCycleApplication` does) returns just after it, once its tasks are scheduled,
    /// and the release must not start before. As long again as the deadline (50 ms at least):
    /// only a responder that does not keep its deadline, or a machine too busy to schedule it,
    /// costs more than the deadline.
    static func warningResponderGrace(_ deadline: Duration) -> Duration { max(.milliseconds(50), deadline) }

    /// Tells every responder of a memory warning, one after another in registration order,
    /// waiting for each at most its ``MemoryWarningResponder/memoryWarningDeadline`` (and
    /// ``warningResponderGrace(_:)``); then, if
    /// any was told and the coordinator ``trimsHeap``, gives what they freed back to the kernel.
    ///
    /// Blocks the calling thread: memwarn calls it on its own threads (the monitor's release
    /// thread, the control endpoint's), never on one of Swift concurrency's.
    package func deliverMemoryWarning(level: MemoryPressureLevel) -> MemoryWarningDelivery {
        let responders = liveWarningResponders
        let start = ContinuousClock.now
        var overran = 0
        for responder in responders {
            let done = ConditionLock(false)
            Task.detached { [responder] in
                await responder.didReceiveMemoryWarning(level: level)
                done.withLock { $0 = true }
            }
            let wait = responder.memoryWarningDeadline + Self.warningResponderGrace(responder.memoryWarningDeadline)
            if done.wait(timeout: wait, until: { $0 ? true : nil }) == nil { overran += 1 }
        }
        if trimsHeap && !responders.isEmpty { Self.returnFreedMemory() }
        return MemoryWarningDelivery(responders: responders.count, overran: overran, duration: .now - start)
    }
}
