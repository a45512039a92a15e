/// FNV-1a, 64-bit: the checksum a ``MediaAsset`` records of its decoded bytes.
///
/// Not cryptographic: it detects a source file that changed between two decodes, not an
/// adversary.
struct FNV1a64: Sendable, Hashable {
    static let offsetBasis: UInt64 = 0xcbf2_9ce4_8422_2325
    static let prime: UInt64 = 0x0000_0100_0000_01b3

    /// The checksum so far.
    private(set) var value = offsetBasis

    /// Folds bytes into the checksum.
    ///
    /// - Complexity: O(n).
    mutating func combine(_ bytes: some Sequence<UInt8>) {
        var hash = value
        for byte in bytes {
            hash ^= UInt64(byte)
            hash &*= Self.prime
        }
        value = hash
    }

    /// Folds an integer into the checksum, as 8 little-endian bytes.
    mutating func combine(_ integer: Int) {
        let bits = UInt64(bitPattern: Int64(integer))
        combine((0..<8).lazy.map { UInt8(truncatingIfNeeded: bits >> ($0 * 8)) })
    }

    /// The checksum of an image: its dimensions, then its bytes.
    ///
    /// - Complexity: O(n) in the bytes.
    static func checksum(width: Int, height: Int, bytes: [UInt8]) -> UInt64 {
        var hash = FNV1a64()
        hash.combine(width)
        hash.combine(height)
        bytes.withUnsafeBufferPointer { hash.combine($0) }
        return hash.value
    }
}
