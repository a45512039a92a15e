/// Anything that can give memory back when memory is tight.
///
/// memwarn's own stores (`DiscardableCache`, `MediaStore`, `ResourcePool`) register
/// themselves; register your own with ``ReleaseCoordinator/register(_:)``. The coordinator
/// holds consumers weakly: one that is deallocated leaves the registry by itself.
///
/// Implementations are called on the thread that asks the coordinator for a release: for
/// automatic releases, the monitor's release thread (`memwarn-release`), never the thread that
/// reads the kernel's events; for `memwarn trigger` and a node agent's asks, the control
/// endpoint's thread (`memwarn-control`); otherwise whichever thread calls
/// ``ReleaseCoordinator/release(level:targetBytes:tiers:)``. Two of these can overlap, so
/// implementations must be thread-safe. The article "Writing your own consumer", in the
/// `Memwarn` module's documentation, says which tier a consumer belongs in, what its figures
/// count and what a release must do.
public protocol MemoryConsumer: AnyObject, Sendable {
    /// A name for reports, such as `thumbnails`.
    var name: String { get }
    /// The consumer's tier in the release order.
    var tier: ReleaseTier { get }
    /// The bytes it holds now: everything it owns, in use or not.
    var footprintBytes: Int { get }
    /// The bytes it holds in content already discarded or expired, dropped first in tier
    /// ``ReleaseTier/discarded`` (0 by default).
    var discardedBytes: Int { get }
    /// The part of ``footprintBytes`` in use now — buffers lent to running work, handles
    /// checked out, content under access — which no release can give back until the work
    /// returns it; `nil` (the default) when the consumer does not say. Declare it as `Int?`: an
    /// `Int` property of that name is another property, and the default stays. A value below 0
    /// or above ``footprintBytes`` is clamped to that range where it is reported.
    ///
    /// The monitor's exhaustion report, the control endpoint's `status`, the metric
    /// `memwarn_consumer_in_use_bytes` and `memwarn soak` carry it, so that memory held by work
    /// in flight is told apart from memory a release failed to give.
    var inUseBytes: Int? { get }

    /// Gives memory back.
    ///
    /// - Parameter request: the level, the tier being walked (``ReleaseTier/discarded`` asks
    ///   only for free-to-drop content) and the bytes still wanted.
    /// - Returns: the bytes freed (may be less or more than asked).
    func release(_ request: ReleaseRequest) -> Int
}

extension MemoryConsumer {
    /// No discarded content: 0.
    public var discardedBytes: Int { 0 }
    /// Not said: `nil`.
    public var inUseBytes: Int? { nil }
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
