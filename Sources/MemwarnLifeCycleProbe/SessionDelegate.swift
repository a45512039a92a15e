import Foundation
import Memwarn
import MemwarnLifeCycle
import MemwarnSystem

/// A client session as a unit: a working set held in a `DiscardableCache` of `PurgeableData`
/// (in use while the session is in the foreground, purgeable once it is in the background),
/// and acknowledged writes, saved to a file in `didEnterBackground` and loaded again when the
/// session is relaunched after it was terminated.
final class SessionDelegate: LifeCycleDelegate {
    typealias Subject = LifeCycleUnit

    static let entryBytes = 256 << 10

    let id: String
    let workingSetBytes: Int
    let stateFile: String
    /// `willTerminate` ignores cancellation and runs for a minute: it must be cut off.
    let overrunsTermination: Bool
    let workingSet = DiscardableCache<Int, PurgeableData>()
    /// Memory the session can rebuild and lets go of on a memory warning (none unless planned).
    private let scratch: Locked<[UInt8]>
    private let writes = Locked<[Int]>([])
    private let restoredWrites = Locked<Int?>(nil)

    init(id: String, workingSetBytes: Int, scratchBytes: Int, directory: String, overrunsTermination: Bool) {
        self.id = id
        scratch = Locked([UInt8](repeating: 1, count: scratchBytes))
        self.workingSetBytes = workingSetBytes
        self.stateFile = "\(directory)/\(id).state"
        self.overrunsTermination = overrunsTermination
        workingSet.name = "unit \(id) working set"
        for key in 0..<(workingSetBytes / Self.entryBytes) { workingSet.setObject(Self.entry(key), forKey: key, cost: Self.entryBytes) }
    }

    /// A fresh entry, in use (as `PurgeableData` is created).
    static func entry(_ key: Int) -> PurgeableData {
        PurgeableData(repeating: UInt8(truncatingIfNeeded: key), count: entryBytes)
    }

    /// Acknowledges `count` more writes; returns how many it holds.
    func write(_ count: Int) -> Int {
        writes.withLock { writes in
            for _ in 0..<count { writes.append(writes.count) }
            return writes.count
        }
    }

    var writeCount: Int { writes.withLock { $0.count } }
    /// Whether the writes are exactly 0, 1, 2, ... (nothing lost or doubled).
    var writesAreIntact: Bool { writes.withLock { $0.enumerated().allSatisfy { $0.offset == $0.element } } }
    var restored: Int? { restoredWrites.withLock { $0 } }

    func willFinishLaunching(_ unit: LifeCycleUnit, restoring: Bool) async throws {
        unit.adopt(workingSet)
        guard restoring else { return }
        let data = try Data(contentsOf: URL(fileURLWithPath: stateFile))
        let saved = try JSONDecoder().decode([Int].self, from: data)
        writes.withLock { $0 = saved }
        restoredWrites.withLock { $0 = saved.count }
    }

    func didEnterBackground(_ unit: LifeCycleUnit) async throws {
        try save()
        for key in 0..<(workingSetBytes / Self.entryBytes) { workingSet.object(forKey: key)?.endContentAccess() }
    }

    func willEnterForeground(_ unit: LifeCycleUnit) async {
        for key in 0..<(workingSetBytes / Self.entryBytes) {
            if let entry = workingSet.object(forKey: key), entry.beginContentAccess() { continue }
            workingSet.setObject(Self.entry(key), forKey: key, cost: Self.entryBytes)  // purged: rebuilt, in use
        }
    }

    /// Lets the scratch memory go, and says so: `{"dropped": bytes, "unit": id, "level": level}`.
    func didReceiveMemoryWarning(_ unit: LifeCycleUnit, level: MemoryPressureLevel) async {
        let dropped = scratch.withLock { scratch in
            defer { scratch = [] }
            return scratch.count
        }
        guard dropped > 0 else { return }
        reply(["dropped": "\(dropped)", "unit": unit.id, "level": level.rawValue])
    }

    func willTerminate(_ unit: LifeCycleUnit) async {
        if overrunsTermination {
            // A detached sleep is not cancelled with its waiter: this ignores cancellation.
            await Task.detached { try? await Task.sleep(for: .seconds(60)) }.value
        }
        try? save()
    }

    /// Writes the acknowledged writes to the state file, durably (temporary file, fsync, rename).
    private func save() throws {
        let data = try JSONEncoder().encode(writes.withLock { $0 })
        let temporary = stateFile + ".tmp"
        guard FileManager.default.createFile(atPath: temporary, contents: data) else { throw ProbeFailure(error: "cannot write \(temporary)") }
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: temporary))
        try handle.synchronize()
        try handle.close()
        guard rename(temporary, stateFile) == 0 else { throw ProbeFailure(error: "rename to \(stateFile) failed: errno \(errno)") }
    }
}

struct ProbeFailure: Error, Encodable { var error: String }
