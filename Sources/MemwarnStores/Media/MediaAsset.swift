import MemwarnSystem

/// A large decoded image that can be dropped under memory pressure and rebuilt from its
/// source file on next access: the "images and media read from files" that iOS asks apps to
/// discard on a memory warning.
///
/// The asset decodes its PPM or PGM file (binary PPM or PGM, `P6`/`P5`) on first access, or when
/// ``load()`` is called, and records a checksum (FNV-1a, 64-bit) of the decoded pixels.
/// ``releaseBuffer()`` — usually called by a ``MediaStore`` on a warning — drops the pixels
/// unless the asset is in use; the next ``withPixels(_:)`` decodes the file again and checks
/// the result against the recorded checksum, so a file that changed on disk is an error, not
/// silently different pixels.
///
/// Thread-safe. Concurrent first accesses decode once.
public final class MediaAsset: Sendable {
    private struct State {
        var pixels: [UInt8]?
        var width = 0
        var height = 0
        var checksum: UInt64?
        var users = 0
        var decodeCount = 0
    }

    /// The source file.
    public let path: String
    private let state = Locked(State())
    /// Serializes decoding, so that concurrent accesses to a released asset decode once.
    /// Never taken while `state` is held.
    private let decoding = Locked(())

    /// Creates an asset for a file; nothing is read until the first access or ``load()``.
    ///
    /// - Parameter path: the PPM or PGM file.
    public init(path: String) {
        self.path = path
    }

    /// The decoded bytes held now: `width × height × 4`, or 0 when not resident.
    public var residentBytes: Int { state.withLock { $0.pixels?.count ?? 0 } }

    /// Whether the decoded pixels are in memory.
    package var isResident: Bool { state.withLock { $0.pixels != nil } }

    /// Whether a ``withPixels(_:)`` body is running (the buffer cannot be released).
    package var isInUse: Bool { state.withLock { $0.users > 0 } }

    /// The decoded bytes held now while in use, else 0: one read of the state, not two.
    var residentBytesInUse: Int { state.withLock { $0.users > 0 ? $0.pixels?.count ?? 0 : 0 } }

    /// The image's size, known once it has been decoded.
    public var size: (width: Int, height: Int)? {
        state.withLock { $0.checksum == nil ? nil : ($0.width, $0.height) }
    }

    /// The checksum of the pixels recorded at the first decode, `nil` before it.
    public var checksum: UInt64? { state.withLock { $0.checksum } }

    /// How many times the file was decoded (1 after the first access; +1 per reload).
    package var decodeCount: Int { state.withLock { $0.decodeCount } }

    /// Decodes the file now if the pixels are not resident.
    ///
    /// - Complexity: O(n) in the image when it decodes, else O(1).
    /// - Throws: ``MediaError`` as ``withPixels(_:)`` does.
    public func load() throws(MediaError) {
        state.withLock { $0.users += 1 }
        defer { endUse() }
        _ = try residentPixels()
    }

    /// Runs `body` with the decoded pixels, decoding the file first if they are not resident.
    ///
    /// While `body` runs the asset is in use and ``releaseBuffer()`` leaves it alone. The
    /// pointer is valid only inside `body`.
    ///
    /// - Parameter body: gets the RGBA8 bytes (`width × height × 4`, rows top to bottom),
    ///   the width and the height.
    /// - Returns: what `body` returns.
    /// - Complexity: O(1) plus `body` when resident; O(n) to decode and verify otherwise.
    /// - Throws: ``MediaError`` when the file cannot be decoded, or `.changedOnDisk` when a
    ///   reload no longer matches the checksum of the first decode; or what `body` throws.
    public func withPixels<T>(_ body: (_ rgba: UnsafeRawBufferPointer, _ width: Int, _ height: Int) throws -> T) throws -> T {
        state.withLock { $0.users += 1 }
        defer { endUse() }
        let (pixels, width, height) = try residentPixels()
        return try pixels.withUnsafeBytes { try body($0, width, height) }
    }

    /// Drops the decoded pixels unless the asset is in use.
    ///
    /// - Returns: the bytes freed (0 when not resident or in use).
    /// - Complexity: O(1) (the buffer is freed when the last reference goes).
    @discardableResult
    public func releaseBuffer() -> Int {
        let dropped: [UInt8]? = state.withLock { state in
            guard state.users == 0, let pixels = state.pixels else { return nil }
            state.pixels = nil
            return pixels
        }
        return dropped?.count ?? 0  // `dropped` is freed here, outside the lock
    }

    // MARK: Decoding

    private func endUse() {
        state.withLock { $0.users -= 1 }
    }

    /// The resident pixels, decoding (and verifying against the first decode) if needed.
    /// The caller holds a use.
    private func residentPixels() throws(MediaError) -> ([UInt8], Int, Int) {
        if let resident = state.withLock({ state in state.pixels.map { ($0, state.width, state.height) } }) {
            return resident
        }
        return try decoding.withLock { _ throws(MediaError) -> ([UInt8], Int, Int) in
            if let resident = state.withLock({ state in state.pixels.map { ($0, state.width, state.height) } }) {
                return resident  // another thread decoded it while we waited
            }
            let image = try PortablePixmap.decode(file: path)
            let sum = FNV1a64.checksum(width: image.width, height: image.height, bytes: image.rgba)
            let path = self.path
            return try state.withLock { state throws(MediaError) -> ([UInt8], Int, Int) in
                state.decodeCount += 1
                if let recorded = state.checksum {
                    guard recorded == sum, state.width == image.width, state.height == image.height else {
                        throw MediaError(
                            .changedOnDisk,
                            """
                            changed on disk since first decoded: \(image.width)×\(image.height), checksum \
                            \(hex(sum)), expected \(state.width)×\(state.height), checksum \(hex(recorded))
                            """, path: path)
                    }
                } else {
                    state.checksum = sum
                    state.width = image.width
                    state.height = image.height
                }
                state.pixels = image.rgba
                return (image.rgba, image.width, image.height)
            }
        }
    }
}

private func hex(_ value: UInt64) -> String {
    let digits = String(value, radix: 16)
    return String(repeating: "0", count: 16 - digits.count) + digits
}
