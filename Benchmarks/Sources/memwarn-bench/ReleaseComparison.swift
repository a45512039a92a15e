/// The release benchmark on glibc's default heap (this process) beside the same run on a
/// huge-page heap (a child process) and the kernel's own cost of taking 1 GiB back.
struct ReleaseComparison {
    var defaultHeap: ReleaseBenchmark.Result
    var hugePageHeap: HugePageHeapRun
    var floor: KernelReturnFloor

    private func ms(_ nanoseconds: UInt64) -> Double { Double(nanoseconds) / 1_000_000 }
    private func median(_ values: [UInt64]) -> UInt64 { values.sorted()[(values.count - 1) / 2] }
    private func runs(_ values: [UInt64]) -> String { values.map { fixed(ms($0), 1) }.joined(separator: " ") }


    var report: String {
        let goal = fixed(ReleaseBenchmark.goalMilliseconds, 0)
        func verdict(_ milliseconds: Double?) -> String {
            guard let milliseconds else { return "no figure" }
            return (milliseconds < ReleaseBenchmark.goalMilliseconds ? "met" : "NOT met") + " (\(fixed(milliseconds, 2)) ms)"
        }
        return """
        \(defaultHeap.report)

        The same benchmark in a child process with GLIBC_TUNABLES=\(HugePageHeapRun.tunables) (the heap on 2 MiB pages):

        \(hugePageHeap.table)

        Floors, this process (glibc default heap), median of \(floor.smallPagesNanoseconds.count):
        kernel alone, munmap of 1 GiB of touched anonymous memory: 4 KiB pages \(fixed(ms(median(floor.smallPagesNanoseconds)), 1)) ms \
        (runs \(runs(floor.smallPagesNanoseconds))); 2 MiB pages \(fixed(ms(median(floor.hugePagesNanoseconds)), 1)) ms \
        (runs \(runs(floor.hugePagesNanoseconds)); \(floor.hugePagesBacked >> 20) MiB were on huge pages)
        plain C, the same 1,000,000 sizes malloc'd then free'd in order + malloc_trim(0): \(fixed(ms(median(floor.mallocFreeNanoseconds)), 1)) ms \
        (runs \(runs(floor.mallocFreeNanoseconds)))

        goal: 1 GiB release < \(goal) ms (trimsHeap, memory back with the kernel):
          PurgeableData (memwarn's arena):  \(verdict(defaultHeap.fullReleaseMilliseconds(.purgeable)))
          [UInt8], glibc default heap:      \(verdict(defaultHeap.fullReleaseMilliseconds(.arrays)))
          [UInt8], huge-page heap:          \(verdict(hugePageHeap.fullReleaseMilliseconds))
        """
    }

    var json: JSON {
        .object([
            ("benchmark", .string("release")),
            ("default_heap", defaultHeap.json),
            ("huge_page_heap", .raw(hugePageHeap.json)),
            ("kernel_floor", .object([
                ("bytes", .number(KernelReturnFloor.bytes)),
                ("munmap_4k_pages_ms", .array(floor.smallPagesNanoseconds.map { .double(ms($0), digits: 3) })),
                ("munmap_2m_pages_ms", .array(floor.hugePagesNanoseconds.map { .double(ms($0), digits: 3) })),
                ("huge_pages_backed_bytes", .number(floor.hugePagesBacked)),
                ("c_malloc_free_in_order_and_trim_ms", .array(floor.mallocFreeNanoseconds.map { .double(ms($0), digits: 3) })),
            ])),
            ("goal_full_release_ms", .double(ReleaseBenchmark.goalMilliseconds, digits: 0)),
            ("goal_met_purgeable_data", defaultHeap.goalMet(.purgeable).map { .bool($0) } ?? .double(.nan, digits: 0)),
            ("goal_met_arrays_default_heap", defaultHeap.goalMet(.arrays).map { .bool($0) } ?? .double(.nan, digits: 0)),
            ("goal_met_arrays_huge_page_heap", hugePageHeap.goalMet.map { .bool($0) } ?? .double(.nan, digits: 0)),
        ])
    }
}
