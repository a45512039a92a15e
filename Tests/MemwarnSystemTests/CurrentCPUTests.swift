import Dispatch
import Foundation
import MemwarnSystem
import Synchronization
import Testing

/// `CurrentCPU.number()` reads the CPU from the thread's rseq area (glibc 2.35 and later) or asks
/// `sched_getcpu`. The kernel says, too, where a thread runs: field 39 of
/// `/proc/thread-self/stat`. A wrong read of the area (a wrong offset, a wrong field) gives a
/// number that does not follow the thread from CPU to CPU, and this test sees it.
@Suite struct CurrentCPUTests {
    /// The CPU the kernel last ran the calling thread on.
    static func kernelsCPU() throws -> Int {
        let stat = try String(contentsOfFile: "/proc/thread-self/stat", encoding: .utf8)
        // After the command's closing parenthesis: field 3 (the state) is the first.
        let fields = try #require(stat.split(separator: ")").last).split(separator: " ")
        return try #require(Int(fields[39 - 3]))
    }

    @Test func theNumberIsTheCPUTheKernelRunsTheThreadOn() throws {
        let checked = Atomic<Int>(0)
        let disagreed = Atomic<Int>(0)
        let seen = Mutex<Set<Int>>([])
        // More threads than CPUs, so that threads run on every CPU the process may use.
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            for _ in 0..<300 {
                let before = CurrentCPU.number()
                guard let kernel = try? Self.kernelsCPU() else { continue }
                let after = CurrentCPU.number()
                // A thread that moved meanwhile says nothing.
                guard before == after else { continue }
                checked.add(1, ordering: .relaxed)
                seen.withLock { _ = $0.insert(kernel) }
                if kernel != before { disagreed.add(1, ordering: .relaxed) }
            }
        }
        let checks = checked.load(ordering: .relaxed)
        #expect(checks > 0, "every read moved between CPUs")
        // A thread can leave a CPU and come back during the read of /proc: a few disagreements.
        #expect(disagreed.load(ordering: .relaxed) * 20 <= checks, "\(disagreed.load(ordering: .relaxed)) of \(checks) disagreed")
        #expect(seen.withLock { $0 }.allSatisfy { $0 >= 0 && $0 < SystemConfiguration.configuredProcessors })
    }
}
