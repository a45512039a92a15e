public import MemwarnSystem  // public: the inlinable paths use the system layer's Futex, CurrentCPU and SystemThread
public import Synchronization

#if canImport(Glibc)
public import Glibc
#endif

/// A lock that many readers hold at once and one writer at a time holds alone, built for
/// readers that come far more often than writers (a cache's hits).
///
/// A reader announces itself in one of ``slotCount`` counters, each on a cache line of its own,
/// chosen by the CPU it runs on: two readers on two cores write to two different lines, so taking
/// the lock does not bounce one line between the cores (a `pthread_rwlock` keeps one count, which
/// every reader writes). The counters are changed with plain atomic adds (`lock xadd`): an
/// overflow-checked add is a compare-and-swap loop, measured ~70 ns slower per read in a large
/// cache. A writer takes the writer's word (one compare-and-swap from free to held) and waits
/// until every counter is back at zero; a reader that finds the word held steps back and sleeps
/// on it (a futex) until the writer is done. The word and the counters are sequentially
/// consistent, so a reader and a writer never both believe they hold the lock (each writes its
/// own variable before it reads the other's). The word is the writers' lock and the readers'
/// flag at once: a set takes one atomic instruction to lock and one to unlock, as a mutex does
/// (a pthread mutex beside a flag took a third, and two calls: measured 3–5 ns of a set's 100 at
/// 20,000 entries).
///
/// Readers never block each other; a writer waits for the readers already in, then holds
/// readers off until it is done. For the cache's own code only: the protected state is read by
/// readers and changed only by writers (apart from atomics of its own).
@usableFromInline
final class ReadMostlyLock: @unchecked Sendable {
    // @unchecked: `readers` and `writer` are allocated once, in one block, and are atomics.

    /// One reader counter, alone on its cache line.
    @usableFromInline
    struct ReaderSlot: ~Copyable {
        @usableFromInline let count = Atomic<Int>(0)
        // Padding to 64 bytes: a neighbour's counter never shares the line.
        private let padding: (Int, Int, Int, Int, Int, Int, Int) = (0, 0, 0, 0, 0, 0, 0)

        @usableFromInline init() {}
    }

    /// How many reader counters a lock has: the machine's CPUs, rounded up to a power of two,
    /// at most 64 (beyond, CPUs share counters). A writer reads every counter, so a lock on a
    /// 2-CPU machine has 2, not 64.
    @usableFromInline static let machineSlotCount: Int = {
        let processors = min(64, SystemConfiguration.configuredProcessors)
        var count = 1
        while count < processors { count <<= 1 }
        return count
    }()

    /// This lock's number of reader counters (``machineSlotCount``).
    @usableFromInline let slotCount = ReadMostlyLock.machineSlotCount

    @usableFromInline let readers: UnsafeMutablePointer<ReaderSlot>
    /// The writer's word: ``free``, ``held``, or ``heldWithSleepers`` (a writer holds it, and
    /// threads may be asleep on it, to be woken when it is let go). On a cache line of its own,
    /// after the readers' counters, in the same block: a read loads the lock's two pointers and
    /// no other object.
    @usableFromInline let writer: UnsafeMutablePointer<Atomic<UInt32>>

    @inlinable static var free: UInt32 { 0 }
    @inlinable static var held: UInt32 { 1 }
    @inlinable static var heldWithSleepers: UInt32 { 2 }

    /// Whether a writer holds the lock or is waiting for the readers inside.
    @inlinable
    var hasWriter: Bool { writer.pointee.load(ordering: .sequentiallyConsistent) != Self.free }

    @usableFromInline
    init() {
        // Aligned to a cache line, so that each counter, and the writer's word after them, has
        // a line to itself.
        let stride = MemoryLayout<ReaderSlot>.stride
        let block = UnsafeMutableRawPointer.allocate(byteCount: (slotCount + 1) * stride, alignment: 64)
        readers = block.bindMemory(to: ReaderSlot.self, capacity: slotCount)
        for slot in 0..<slotCount { (readers + slot).initialize(to: ReaderSlot()) }
        writer = (block + slotCount * stride).bindMemory(to: Atomic<UInt32>.self, capacity: 1)
        writer.initialize(to: Atomic(Self.free))
    }

    deinit {
        writer.deinitialize(count: 1)
        readers.deinitialize(count: slotCount)
        UnsafeMutableRawPointer(readers).deallocate()
    }

    /// The calling thread's reader counter: its CPU's, so that readers on different CPUs never
    /// write the same line (a hash of the thread's identity, tried first, put two threads on
    /// one counter in two runs of three, and their reads then ran slower together than one
    /// alone). A thread that moves to another CPU while it holds the lock still releases the
    /// counter it took (``lockShared()`` returns it).
    @inlinable
    var slotOfThisThread: Int {
        let cpu = CurrentCPU.number()
        if cpu >= 0 { return cpu & (slotCount - 1) }
        // No CPU number: the address of the thread's control block, hashed (threads' blocks lie
        // a stack apart; the top bits of a multiplicative hash spread them).
        return Int(truncatingIfNeeded: (UInt64(pthread_self()) &* 0x9E37_79B9_7F4A_7C15) &>> 32) & (slotCount - 1)
    }

    /// Takes the lock shared.
    ///
    /// - Returns: the counter taken, for ``unlockShared(_:)``.
    @inlinable
    func lockShared() -> Int {
        let slot = slotOfThisThread
        while true {
            readers[slot].count.wrappingAdd(1, ordering: .sequentiallyConsistent)
            if !hasWriter { return slot }
            // A writer is in or on its way: step back, and sleep until it is done.
            readers[slot].count.wrappingSubtract(1, ordering: .sequentiallyConsistent)
            waitForTheWriter()
        }
    }

    /// Sleeps until no writer holds the word (a reader that stepped back).
    @usableFromInline
    func waitForTheWriter() {
        var state = writer.pointee.load(ordering: .sequentiallyConsistent)
        while state != Self.free {
            if state == Self.held {
                // Asks to be woken: the writer wakes sleepers only when the word says so.
                let (exchanged, original) = writer.pointee.compareExchange(
                    expected: Self.held, desired: Self.heldWithSleepers, ordering: .sequentiallyConsistent)
                if !exchanged {
                    state = original
                    continue
                }
            }
            Futex.wait(on: writer, whileItHolds: Self.heldWithSleepers)
            state = writer.pointee.load(ordering: .sequentiallyConsistent)
        }
    }

    /// Releases a shared hold.
    @inlinable
    func unlockShared(_ slot: Int) {
        readers[slot].count.wrappingSubtract(1, ordering: .sequentiallyConsistent)
    }

    /// Takes the lock alone: waits for the readers already in.
    @inlinable
    func lock() {
        // Sequentially consistent: the readers' counters are read only after the word is seen
        // held by every reader that comes later.
        if !writer.pointee.compareExchange(expected: Self.free, desired: Self.held, ordering: .sequentiallyConsistent).exchanged {
            lockContended()
        }
        for slot in 0..<slotCount {
            while readers[slot].count.load(ordering: .sequentiallyConsistent) != 0 { SystemThread.yield() }
        }
    }

    /// Takes the writer's word when another writer holds it: marks it as having sleepers and
    /// sleeps on it until it was free when marked (then this writer holds it, marked, and wakes
    /// the others when it lets go).
    @usableFromInline
    func lockContended() {
        while writer.pointee.exchange(Self.heldWithSleepers, ordering: .sequentiallyConsistent) != Self.free {
            Futex.wait(on: writer, whileItHolds: Self.heldWithSleepers)
        }
    }

    /// Releases the lock taken alone.
    @inlinable
    func unlock() {
        // Releasing: a reader that then sees the word free (its load is sequentially
        // consistent, so acquiring) sees every write made under the lock.
        if writer.pointee.exchange(Self.free, ordering: .releasing) == Self.heldWithSleepers { Futex.wakeAll(on: writer) }
    }

    /// Runs `body` holding the lock alone.
    @inlinable
    func withLock<T>(_ body: () throws -> T) rethrows -> T {
        lock()
        defer { unlock() }
        return try body()
    }

    /// Runs `body` holding the lock shared.
    @inlinable
    func withSharedLock<T>(_ body: () throws -> T) rethrows -> T {
        let slot = lockShared()
        defer { unlockShared(slot) }
        return try body()
    }
}
