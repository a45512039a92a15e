import Testing

@testable import CgroupKit

#if canImport(Glibc)
import Glibc
#endif

/// The fault plan tests set on `KernelFiles`: the failures it forces reach the readers as the
/// kernel's own would (the same codes, the same `errno`, transient or not), only on the files and
/// steps it names, as many times as it says; without one every read goes to the file.
struct ReadFaultPlanTests {
    static let usage = "/sys/fs/cgroup/app/memory.current"
    static let limit = "/sys/fs/cgroup/app/memory.max"

    static func tree() throws -> ScratchTree {
        let tree = try ScratchTree()
        try tree.write(usage, "4096\n")
        try tree.write(limit, "8192\n")
        return tree
    }

    static func files(_ tree: ScratchTree, _ plan: ReadFaultPlan) -> KernelFiles {
        var files = tree.files
        files.faultPlan = plan
        return files
    }

    @Test func aForcedOpenFailureIsReadAsTheKernelsWithItsErrno() throws {
        let tree = try Self.tree()
        let plan = ReadFaultPlan()
        let files = Self.files(tree, plan)
        plan.fail([.open], of: "/memory.current", with: EMFILE, times: 2)
        for _ in 0..<2 {
            let error = #expect(throws: CgroupError.self) { try files.read(Self.usage) }
            #expect(error?.code == .unreadable && error?.errno == EMFILE && error?.isTransient == true, "\(String(describing: error))")
            #expect(error?.path == tree.path(Self.usage))
        }
        #expect(try files.read(Self.usage) == "4096\n", "two failures asked for, the third read goes to the file")
        #expect(try files.read(Self.limit) == "8192\n", "another file is not failed")
        #expect(plan.forcedCount == 2 && plan.forcedCount(of: "/memory.current") == 2 && !plan.isActive)
    }

    @Test func aGoneFileIsNotFoundAndNotTransient() throws {
        let tree = try Self.tree()
        let plan = ReadFaultPlan()
        let files = Self.files(tree, plan)
        plan.fail([.read], of: nil, with: ENODEV)
        let error = #expect(throws: CgroupError.self) { try files.read(Self.limit) }
        #expect(error?.code == .notFound && error?.errno == ENODEV && error?.isTransient == false, "\(String(describing: error))")
        plan.clear()
        #expect(try files.read(Self.limit) == "8192\n")
    }

    @Test func theHeldUsageFileFailsItsOpenAndItsReadsAsPlanned() throws {
        let tree = try Self.tree()
        let plan = ReadFaultPlan()
        let files = Self.files(tree, plan)
        plan.fail([.open], of: "/memory.current", with: ENFILE, times: 1)
        let refused = #expect(throws: CgroupError.self) { try UsageFile(Self.usage, format: .bytes, files: files) }
        #expect(refused?.code == .unreadable && refused?.errno == ENFILE)
        let usage = try UsageFile(Self.usage, format: .bytes, files: files)
        plan.fail([.read], of: "app/memory.current", with: EAGAIN, times: 1)
        let failed = #expect(throws: CgroupError.self) { try usage.read() }
        #expect(failed?.code == .unreadable && failed?.errno == EAGAIN && failed?.isTransient == true)
        #expect(try usage.read() == 4096)
        plan.fail([.read], of: nil, with: ENODEV, times: 1)
        let gone = #expect(throws: CgroupError.self) { try usage.read() }
        #expect(gone?.code == .notFound && gone?.errno == ENODEV, "a removed cgroup's held file, as the kernel fails it")
        #expect(plan.forcedCount(of: "/memory.current") == 3)
    }

    @Test func rulesApplyInTheOrderGivenAndCopiesShareThePlan() throws {
        let tree = try Self.tree()
        let plan = ReadFaultPlan()
        let files = Self.files(tree, plan)
        let copy = files
        plan.fail(of: "/memory.max", with: ENOMEM, times: 1)
        plan.fail(of: nil, with: EINTR, times: 1)
        #expect((#expect(throws: CgroupError.self) { try copy.read(Self.limit) })?.errno == ENOMEM, "the first rule that matches")
        #expect((#expect(throws: CgroupError.self) { try copy.read(Self.limit) })?.errno == EINTR, "then the next")
        #expect(try copy.read(Self.limit) == "8192\n")
        #expect(copy == files && files != tree.files && Self.files(tree, ReadFaultPlan()) != files, "files compare by their plan's identity")
        #expect(tree.files == KernelFiles(root: tree.root), "without a plan, as before")
    }
}
