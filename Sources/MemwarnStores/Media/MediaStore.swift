public import MemwarnRelease
import MemwarnSystem

/// Decoded media by name, released under memory pressure: tier ``/MemwarnRelease/ReleaseTier/media``.
///
/// Each asset is a ``MediaAsset``: a decoded image rebuilt from its source file on next
/// access. On a memory warning the store drops the buffers of assets not in use, largest
/// first, until the coordinator's target is met.
///
/// ```swift
/// let media = MediaStore(name: "thumbnails")
/// try media.add("hero", path: "/srv/assets/hero.ppm")
/// let mean = try media["hero"]!.withPixels { rgba, width, height in … }
/// ```
///
/// Thread-safe.
public final class MediaStore: MemoryConsumer, Sendable {
    /// The store's name, for reports.
    public let name: String
    /// The release tier: ``/MemwarnRelease/ReleaseTier/media``.
    public let tier = ReleaseTier.media
    private let assets = Locked<[String: MediaAsset]>([:])

    /// Creates an empty store and registers it with `coordinator` (weakly: a deallocated
    /// store leaves by itself).
    ///
    /// - Parameters:
    ///   - name: the store's name in reports.
    ///   - coordinator: the coordinator whose releases the store answers; `nil` for none.
    public init(name: String = "media", coordinator: ReleaseCoordinator? = .shared) {
        self.name = name
        coordinator?.register(self)
    }

    /// Adds an asset for a file under a key, replacing any asset under that key.
    ///
    /// - Parameters:
    ///   - key: the asset's name in the store.
    ///   - path: the PPM or PGM file.
    ///   - loadNow: decode at once (the default), so that errors surface here; otherwise on
    ///     first access.
    /// - Returns: the asset.
    /// - Complexity: O(n) in the image when `loadNow`, else O(1).
    /// - Throws: ``MediaError`` from decoding; the store is then unchanged.
    @discardableResult
    public func add(_ key: String, path: String, loadNow: Bool = true) throws(MediaError) -> MediaAsset {
        let asset = MediaAsset(path: path)
        if loadNow { try asset.load() }
        assets.withLock { $0[key] = asset }
        return asset
    }

    /// The asset under a key.
    ///
    /// - Parameter key: the asset's name in the store.
    /// - Returns: the asset, or `nil` when none is under `key`.
    public subscript(key: String) -> MediaAsset? { assets.withLock { $0[key] } }

    /// Removes the asset under a key (its buffer goes when the last reference does).
    ///
    /// - Parameter key: the asset's name in the store.
    /// - Returns: the asset removed, or `nil` when none was under `key`.
    @discardableResult
    public func remove(_ key: String) -> MediaAsset? {
        assets.withLock { $0.removeValue(forKey: key) }
    }

    /// The keys, in no particular order.
    public var keys: [String] { assets.withLock { Array($0.keys) } }

    // MARK: MemoryConsumer

    /// The decoded bytes resident now, over all assets.
    ///
    /// - Complexity: O(n) in the assets.
    public var footprintBytes: Int { snapshot().reduce(0) { $0 + $1.residentBytes } }

    /// The decoded bytes of assets in use now (inside a ``MediaAsset/withPixels(_:)``): no release drops them.
    ///
    /// - Complexity: O(n) in the assets.
    public var inUseBytes: Int? { snapshot().reduce(0) { $0 + $1.residentBytesInUse } }

    /// Drops the buffers of assets not in use, largest first, until `targetBytes` are freed
    /// (media holds no discarded content: a ``/MemwarnRelease/ReleaseTier/discarded`` request frees nothing).
    ///
    /// - Parameter request: the tier being walked and the bytes still wanted.
    /// - Returns: the bytes freed.
    /// - Complexity: O(n log n) in the assets.
    public func release(_ request: ReleaseRequest) -> Int {
        guard request.tier != .discarded, request.targetBytes > 0 else { return 0 }
        let candidates = snapshot()
            .compactMap { asset -> (asset: MediaAsset, bytes: Int)? in
                let bytes = asset.residentBytes
                return bytes > 0 && !asset.isInUse ? (asset, bytes) : nil
            }
            .sorted { $0.bytes > $1.bytes }
        var freed = 0
        for candidate in candidates {
            if freed >= request.targetBytes { break }
            freed += candidate.asset.releaseBuffer()  // 0 if it came into use meanwhile
        }
        return freed
    }

    private func snapshot() -> [MediaAsset] { assets.withLock { Array($0.values) } }
}
