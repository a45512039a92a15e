/// Anything that can give memory back when memory is tight.
///
/// memwarn's own stores (`DiscardableCache`, `MediaStore`, `ResourcePool`) register
/// themselves; register your own with ``ReleaseCoordinator/register(_:)``. The coordinator
/// holds consumers weakly: one that is deallocated leaves the registry by itself.
///
/// Implementations are called from the coordinator's caller (the monitor's thread for
/// automatic releases) and must be thread-safe.
public protocol MemoryConsumer: AnyObject, Sendable {
    /// A name for reports, such as `thumbnails`.
    var name: String { get }
    /// The consumer's tier in the release order.
    var tier: ReleaseTier { get }
    /// The bytes it holds now.
    var footprintBytes: Int { get }
    /// The bytes it holds in content already discarded or expired, dropped first in tier
    /// ``ReleaseTier/discarded`` (0 by default).
    var discardedBytes: Int { get }

    /// Gives memory back.
    ///
    /// - Parameter request: the level, the tier being walked (``ReleaseTier/discarded`` asks
    ///   only for free-to-drop content) and the bytes still wanted.
    /// - Returns: the bytes freed (may be less or more than asked).
    func release(_ request: ReleaseRequest) -> Int
}

extension MemoryConsumer {
    public var discardedBytes: Int { 0 }
}

/// What a consumer is asked to release.
public struct ReleaseRequest: Sendable, Hashable {
    /// The pressure level behind the release.
    public var level: MemoryPressureLevel
    /// The tier being walked: ``ReleaseTier/discarded`` asks only for content that is
    /// already discarded or expired; the consumer's own tier asks for anything not in use.
    public var tier: ReleaseTier
    /// The bytes still wanted to meet the target; `Int.max` for "all you can".
    public var targetBytes: Int

    /// Creates a request.
    ///
    /// - Parameters:
    ///   - level: the pressure level behind the release.
    ///   - tier: the tier being walked.
    ///   - targetBytes: the bytes still wanted; `Int.max` for "all you can".
    public init(level: MemoryPressureLevel, tier: ReleaseTier, targetBytes: Int) {
        self.level = level
        self.tier = tier
        self.targetBytes = targetBytes
    }
}
