import MemwarnSystem
import MemwarnTestFixtures
import MemwarnTestKit
import Testing

@testable import MemwarnRelease
@testable import MemwarnStores

#if canImport(Glibc)
import Glibc
#endif

struct MediaStoreTests {
    static let everything = ReleaseRequest(level: .warning, tier: .media, targetBytes: .max)

    /// Writes a square PPM whose pixels depend on `seed`.
    static func square(_ directory: ScratchDirectory, _ name: String, side: Int, seed: UInt8 = 0) throws -> String {
        let path = directory.file(name)
        try PortablePixmap.write(
            width: side, height: side,
            pixel: { x, y in
                (UInt8(truncatingIfNeeded: x &+ Int(seed)), UInt8(truncatingIfNeeded: y), seed)
            }, to: path)
        return path
    }

    @Test func releaseDropsTheBufferAndTheNextAccessReloadsAndVerifies() throws {
        let directory = ScratchDirectory()
        defer { directory.remove() }
        let store = MediaStore(name: "media", coordinator: nil)
        let asset = try store.add("photo", path: Self.square(directory, "photo.ppm", side: 16))
        let original = try asset.withPixels { rgba, width, height in
            #expect(width == 16 && height == 16)
            return Array(rgba)
        }
        #expect(store.footprintBytes == 16 * 16 * 4)
        #expect(asset.decodeCount == 1)

        #expect(store.release(Self.everything) == 16 * 16 * 4)
        #expect(store.footprintBytes == 0)
        #expect(!asset.isResident)

        let reloaded = try asset.withPixels { rgba, _, _ in Array(rgba) }
        #expect(reloaded == original)
        #expect(asset.decodeCount == 2)
        #expect(store.footprintBytes == 16 * 16 * 4)
    }

    @Test func aFileChangedOnDiskAfterReleaseFailsTheChecksumOnReload() throws {
        let directory = ScratchDirectory()
        defer { directory.remove() }
        let store = MediaStore(coordinator: nil)
        let path = try Self.square(directory, "photo.ppm", side: 8, seed: 1)
        let asset = try store.add("photo", path: path)
        let recorded = try #require(asset.checksum)
        #expect(store.release(Self.everything) == 8 * 8 * 4)

        _ = try Self.square(directory, "photo.ppm", side: 8, seed: 2)  // same size, other pixels
        let error = #expect(throws: MediaError.self) { try asset.withPixels { _, _, _ in } }
        #expect(error?.code == .changedOnDisk)
        #expect(error?.path == path)
        #expect(asset.checksum == recorded)
        #expect(!asset.isResident)
        #expect(store.footprintBytes == 0)

        _ = try Self.square(directory, "photo.ppm", side: 4, seed: 1)  // other size
        #expect(throws: MediaError.self) { try asset.load() }

        _ = try Self.square(directory, "photo.ppm", side: 8, seed: 1)  // restored
        try asset.load()
        #expect(asset.isResident)
    }

    @Test func anAssetInsideWithPixelsIsNotReleased() throws {
        let directory = ScratchDirectory()
        defer { directory.remove() }
        let store = MediaStore(coordinator: nil)
        let busy = try store.add("busy", path: Self.square(directory, "busy.ppm", side: 32))
        try store.add("idle", path: Self.square(directory, "idle.ppm", side: 8))
        try busy.withPixels { rgba, _, _ in
            #expect(busy.isInUse)
            #expect(store.release(Self.everything) == 8 * 8 * 4)  // only the idle one
            #expect(busy.releaseBuffer() == 0)
            #expect(store.footprintBytes == 32 * 32 * 4)
            #expect(store.inUseBytes == 32 * 32 * 4, "the asset under withPixels is in use")
            #expect(rgba.count == 32 * 32 * 4 && rgba[3] == 255)
        }
        #expect(!busy.isInUse)
        #expect(store.inUseBytes == 0)
        #expect(store.release(Self.everything) == 32 * 32 * 4)
        #expect(store.footprintBytes == 0)
    }

    @Test func anAssetInUseOnAnotherThreadIsNotReleased() async throws {
        let directory = ScratchDirectory()
        defer { directory.remove() }
        let store = MediaStore(coordinator: nil)
        let asset = try store.add("photo", path: Self.square(directory, "photo.ppm", side: 16))
        let inside = AsyncCondition<Bool>()
        let leave = ConditionLock(false)
        let user = Task.detached {
            try asset.withPixels { _, _, _ in
                inside.open()
                _ = leave.wait(timeout: .seconds(10)) { $0 ? true : nil }  // blocks its thread, as a user's work does
            }
        }
        try #require(await inside.wait(within: .seconds(10)), "the other thread is inside withPixels")
        #expect(store.release(Self.everything) == 0)
        #expect(asset.isResident)
        leave.withLock { $0 = true }
        try await user.value
        #expect(store.release(Self.everything) == 16 * 16 * 4)
    }

    @Test func releaseGoesLargestFirstAndStopsAtTheTarget() throws {
        let directory = ScratchDirectory()
        defer { directory.remove() }
        let store = MediaStore(coordinator: nil)
        let small = try store.add("small", path: Self.square(directory, "small.ppm", side: 4))  // 64 B
        let medium = try store.add("medium", path: Self.square(directory, "medium.pgm", side: 8))  // 256 B
        let large = try store.add("large", path: Self.square(directory, "large.ppm", side: 16))  // 1024 B
        #expect(store.footprintBytes == 64 + 256 + 1024)

        #expect(store.release(ReleaseRequest(level: .warning, tier: .media, targetBytes: 1000)) == 1024)
        #expect(!large.isResident && medium.isResident && small.isResident)

        try large.load()
        #expect(store.release(ReleaseRequest(level: .warning, tier: .media, targetBytes: 1025)) == 1024 + 256)
        #expect(!large.isResident && !medium.isResident && small.isResident)
        #expect(store.footprintBytes == 64)

        #expect(store.release(ReleaseRequest(level: .warning, tier: .discarded, targetBytes: .max)) == 0)
        #expect(store.footprintBytes == 64)
    }

    @Test func theCoordinatorReleasesMediaInItsOwnTierOnAWarning() throws {
        let directory = ScratchDirectory()
        defer { directory.remove() }
        let coordinator = ReleaseCoordinator(trimsHeap: false)
        let store = MediaStore(name: "photos", coordinator: coordinator)
        try store.add("a", path: Self.square(directory, "a.ppm", side: 16))
        try store.add("b", path: Self.square(directory, "b.ppm", side: 8))
        let report = coordinator.release(level: .warning, targetBytes: 500)
        #expect(report.entries.map(\.consumer) == ["photos"])
        #expect(report.entries.first?.tier == .media)
        #expect(report.freedBytes == 1024 && report.metTarget)
        #expect(store.footprintBytes == 256)
    }

    @Test func concurrentFirstAccessesDecodeOnce() async throws {
        let directory = ScratchDirectory()
        defer { directory.remove() }
        let asset = MediaAsset(path: try Self.square(directory, "photo.ppm", side: 64))
        #expect(asset.size == nil && asset.residentBytes == 0)
        let sums = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<8 {
                group.addTask { try asset.withPixels { rgba, _, _ in rgba.reduce(0) { $0 + Int($1) } } }
            }
            return try await group.reduce(into: [Int]()) { $0.append($1) }
        }
        #expect(Set(sums).count == 1)
        #expect(asset.decodeCount == 1)
        #expect(asset.size?.width == 64)
    }

    @Test func aFailedAddLeavesTheStoreUnchanged() {
        let store = MediaStore(coordinator: nil)
        #expect(throws: MediaError.self) { try store.add("missing", path: "/nonexistent/missing.ppm") }
        #expect(store["missing"] == nil && store.keys.isEmpty)
    }
}
