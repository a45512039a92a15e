import Foundation
import Memwarn
import MemwarnLifeCycle
import MemwarnSystem

/// A user's session, a memwarn unit: notes the user writes (each acknowledged), and a working
/// set of purgeable pages — in use while the session is in the foreground, purgeable once it is
/// in the background. The notes are saved to a file when the session goes to the background
/// (and at termination), and loaded when it is relaunched after memwarn discarded it.
final class UserSession: LifeCycleDelegate {
    typealias Subject = LifeCycleUnit

    static let pageBytes = 256 << 10
    static let pages = 24  // 6 MiB

    let file: String
    let workingSet = DiscardableCache<Int, PurgeableData>()
    private let notes = Locked<[String]>([])

    init(id: String, directory: String) {
        file = "\(directory)/\(id).notes"
        workingSet.name = "\(id) working set"
        for page in 0..<Self.pages { workingSet.setObject(Self.page(page), forKey: page, cost: Self.pageBytes) }
    }

    static func page(_ number: Int) -> PurgeableData {
        PurgeableData(repeating: UInt8(truncatingIfNeeded: number), count: pageBytes)
    }

    /// Adds a note; returns how many the session holds.
    func write(_ note: String) -> Int {
        notes.withLock { notes in
            notes.append(note)
            return notes.count
        }
    }

    /// The notes it holds, in order.
    var allNotes: [String] { notes.withLock { $0 } }

    func willFinishLaunching(_ unit: LifeCycleUnit, restoring: Bool) async throws {
        unit.adopt(workingSet)
        guard restoring else { return }
        let text = try String(contentsOfFile: file, encoding: .utf8)
        notes.withLock { $0 = text.split(separator: "\n").map(String.init) }
    }

    func didEnterBackground(_ unit: LifeCycleUnit) async throws {
        try save()
        for page in 0..<Self.pages { workingSet.object(forKey: page)?.endContentAccess() }
    }

    func willEnterForeground(_ unit: LifeCycleUnit) async {
        for page in 0..<Self.pages {
            if let data = workingSet.object(forKey: page), data.beginContentAccess() { continue }
            workingSet.setObject(Self.page(page), forKey: page, cost: Self.pageBytes)  // purged: rebuilt, in use
        }
    }

    func willTerminate(_ unit: LifeCycleUnit) async {
        try? save()
    }

    /// Writes the notes durably: a temporary file, fsync, rename.
    private func save() throws {
        let data = Data(allNotes.joined(separator: "\n").utf8)
        let temporary = file + ".tmp"
        try data.write(to: URL(fileURLWithPath: temporary))
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: temporary))
        try handle.synchronize()
        try handle.close()
        try FileSystem.rename(temporary, to: file)
    }
}
