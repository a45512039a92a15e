import MemwarnRelease
import MemwarnSystem
import Synchronization
import Testing

@testable import MemwarnStores

#if canImport(Glibc)
import Glibc
#endif

/// The cache's lock: readers share it, a writer holds it alone. Real threads (not the task
/// pool, whose two threads a blocked test would starve). Run under the thread sanitizer too:
/// it sees the lock's atomics, and reports any access the lock fails to order.
@Suite("ReadMostlyLock")
struct ReadMostlyLockTests {
    /// State the lock guards: two numbers a writer moves together.
    final class Guarded: @unchecked Sendable {
        // @unchecked: touched only under `lock`, which is what the tests check.
        let lock = ReadMostlyLock()
        var first = 0
        var second = 0
    }

    /// Steps the threads of a test report, waited on with a deadline so a broken lock fails the
    /// test instead of hanging it.
    final class Steps: Sendable {
        let done = ConditionLock(Set<String>())
        func mark(_ step: String) { done.withLock { _ = $0.insert(step) } }
        func wait(for step: String) -> Bool {
            done.wait(timeout: .seconds(20)) { $0.contains(step) ? true : nil } ?? false
        }
    }

    @Test func twoReadersHoldTheLockAtOnce() throws {
        let lock = ReadMostlyLock()
        let steps = Steps()
        try SystemThread.start(name: "reader-1") {
            lock.withSharedLock {
                steps.mark("first in")
                // Held until the second reader is in too: a lock that let one reader in at a
                // time would leave both waiting here until the deadline.
                _ = steps.wait(for: "second in")
            }
            steps.mark("first out")
        }
        #expect(steps.wait(for: "first in"))
        try SystemThread.start(name: "reader-2") {
            lock.withSharedLock { steps.mark("second in") }
        }
        #expect(steps.wait(for: "second in"), "the second reader could not enter while the first held the lock")
        #expect(steps.wait(for: "first out"))
    }

    @Test func aWriterWaitsForTheReaderInside() throws {
        let guarded = Guarded()
        let steps = Steps()
        let writerDone = Atomic(false)
        try SystemThread.start(name: "reader") {
            guarded.lock.withSharedLock {
                steps.mark("reader in")
                // Until the writer has announced itself (it holds the writer's word and waits for
                // the readers), then a while longer: it must not get in while this reader is.
                while !guarded.lock.hasWriter { sched_yield() }
                var alone = true
                for _ in 0..<10_000 where writerDone.load(ordering: .sequentiallyConsistent) {
                    alone = false
                }
                for _ in 0..<100 { sched_yield() }
                if writerDone.load(ordering: .sequentiallyConsistent) { alone = false }
                steps.mark(alone ? "reader still alone" : "writer got in")
            }
        }
        #expect(steps.wait(for: "reader in"))
        try SystemThread.start(name: "writer") {
            guarded.lock.withLock {
                guarded.first += 1
                writerDone.store(true, ordering: .sequentiallyConsistent)
            }
            steps.mark("writer out")
        }
        #expect(steps.wait(for: "writer out"))
        #expect(steps.done.withLock { $0.contains("reader still alone") && !$0.contains("writer got in") })
        #expect(guarded.lock.withSharedLock { guarded.first } == 1)
    }

    @Test func readersNeverSeeAWriteHalfDone() throws {
        let guarded = Guarded()
        let steps = Steps()
        let torn = Atomic(0)
        let readsPerThread = 200_000
        for reader in 0..<3 {
            try SystemThread.start(name: "reader-\(reader)") {
                for _ in 0..<readsPerThread {
                    let (first, second) = guarded.lock.withSharedLock { (guarded.first, guarded.second) }
                    if first != second { torn.add(1, ordering: .relaxed) }
                }
                steps.mark("reader \(reader)")
            }
        }
        try SystemThread.start(name: "writer") {
            for _ in 0..<20_000 {
                guarded.lock.withLock {
                    guarded.first += 1
                    guarded.second += 1
                }
            }
            steps.mark("writer")
        }
        for step in ["reader 0", "reader 1", "reader 2", "writer"] { #expect(steps.wait(for: step)) }
        #expect(torn.load(ordering: .relaxed) == 0)
        #expect(guarded.lock.withSharedLock { (guarded.first, guarded.second) } == (20_000, 20_000))
    }

    /// Writers that contend sleep on the writer's word and are woken in turn, and readers that
    /// find a writer in sleep on it too: no increment is lost, no read sees a write half done,
    /// and nothing is left asleep (every thread ends before the deadline). Every thread starts
    /// at once, and the readers read until the last writer is done, so they meet the writers.
    @Test func contendingWritersAndWaitingReadersLoseNothing() throws {
        let guarded = Guarded()
        let steps = Steps()
        let torn = Atomic(0)
        let reads = Atomic(0)
        let writers = 3
        let writersLeft = Atomic(writers)
        let writesPerThread = 20_000
        for reader in 0..<2 {
            try SystemThread.start(name: "reader-\(reader)") {
                _ = steps.wait(for: "go")
                while writersLeft.load(ordering: .sequentiallyConsistent) > 0 {
                    let (first, second) = guarded.lock.withSharedLock { (guarded.first, guarded.second) }
                    if first != second { torn.add(1, ordering: .relaxed) }
                    reads.add(1, ordering: .relaxed)
                }
                steps.mark("reader \(reader)")
            }
        }
        for writer in 0..<writers {
            try SystemThread.start(name: "writer-\(writer)") {
                _ = steps.wait(for: "go")
                for _ in 0..<writesPerThread {
                    guarded.lock.withLock {
                        guarded.first += 1
                        // A write that takes a while, so other writers and readers find it in.
                        if guarded.first % 64 == 0 { sched_yield() }
                        guarded.second += 1
                    }
                }
                writersLeft.subtract(1, ordering: .sequentiallyConsistent)
                steps.mark("writer \(writer)")
            }
        }
        steps.mark("go")
        for step in ["reader 0", "reader 1"] + (0..<writers).map({ "writer \($0)" }) { #expect(steps.wait(for: step)) }
        #expect(torn.load(ordering: .relaxed) == 0)
        #expect(reads.load(ordering: .relaxed) > 0, "the readers read while the writers wrote")
        #expect(guarded.lock.withSharedLock { (guarded.first, guarded.second) } == (writers * writesPerThread, writers * writesPerThread))
        #expect(!guarded.lock.hasWriter)
    }

    /// A reader's counter is its CPU's: one counter per CPU of the machine (a power of two), and
    /// the counter a reader took is the one it gives back, wherever the thread runs by then.
    @Test func readersCountOnTheirCPUsCounter() throws {
        let lock = ReadMostlyLock()
        let processors = sysconf(Int32(_SC_NPROCESSORS_CONF))
        #expect(lock.slotCount >= min(64, processors) && lock.slotCount.nonzeroBitCount == 1)
        // On 8 threads (a choice by thread identity would put some of them on another CPU's
        // counter), the counter taken is the CPU's: checked on takes the thread made without
        // moving (the same CPU just before and just after).
        let mismatches = Atomic<Int>(0)
        let checked = Atomic<Int>(0)
        let steps = Steps()
        for thread in 0..<8 {
            try SystemThread.start(name: "reader-\(thread)") {
                for _ in 0..<1_000 {
                    let before = CurrentCPU.number()
                    let slot = lock.lockShared()
                    let after = CurrentCPU.number()
                    if lock.readers[slot].count.load(ordering: .relaxed) < 1 { mismatches.add(1, ordering: .relaxed) }
                    lock.unlockShared(slot)
                    guard before == after && before >= 0 else { continue }
                    checked.add(1, ordering: .relaxed)
                    if slot != before & (lock.slotCount - 1) { mismatches.add(1, ordering: .relaxed) }
                }
                steps.mark("reader \(thread)")
            }
        }
        for thread in 0..<8 { #expect(steps.wait(for: "reader \(thread)")) }
        #expect(checked.load(ordering: .relaxed) > 0, "every take moved between CPUs")
        #expect(mismatches.load(ordering: .relaxed) == 0)
        #expect((0..<lock.slotCount).allSatisfy { lock.readers[$0].count.load(ordering: .relaxed) == 0 })
    }
}
