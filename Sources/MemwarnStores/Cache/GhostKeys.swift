/// The keys evicted from the small queue unread, remembered by fingerprint for a tenth as many
/// entries as the cache holds (at least 64): a key set again soon after (it was evicted too early) goes
/// straight to the main queue. A direct-mapped table: a new key takes its place over an old
/// one, and two keys may share a fingerprint now and then: the ghost is a hint, not a record.
@usableFromInline
struct GhostKeys {
    @usableFromInline var fingerprints: [UInt32] = []
    @usableFromInline var mask = 0

    @inlinable
    init() {}

    @inlinable
    var isEmpty: Bool { fingerprints.isEmpty }

    /// Sizes the table for about `entries` keys (a power of two, at least 64); grown tables
    /// start empty.
    @inlinable
    mutating func fit(_ entries: Int) {
        guard entries > fingerprints.count || fingerprints.isEmpty else { return }
        var size = 64
        while size < entries { size <<= 1 }
        fingerprints = [UInt32](repeating: 0, count: size)
        mask = size - 1
    }

    @inlinable
    static func split(_ hash: Int) -> (position: Int, fingerprint: UInt32) {
        let mixed = UInt64(bitPattern: Int64(hash)) &* 0x9E37_79B9_7F4A_7C15
        return (Int(truncatingIfNeeded: mixed), UInt32(truncatingIfNeeded: mixed >> 32) | 1)
    }

    @inlinable
    mutating func insert(_ hash: Int) {
        guard !fingerprints.isEmpty else { return }
        let (position, fingerprint) = Self.split(hash)
        fingerprints[position & mask] = fingerprint
    }

    /// Whether the key was evicted recently; forgets it (it is back in the cache).
    @inlinable
    mutating func remove(_ hash: Int) -> Bool {
        guard !fingerprints.isEmpty else { return false }
        let (position, fingerprint) = Self.split(hash)
        guard fingerprints[position & mask] == fingerprint else { return false }
        fingerprints[position & mask] = 0
        return true
    }
}
