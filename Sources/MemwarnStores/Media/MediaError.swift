import MemwarnSystem

/// Why a media file could not be decoded, written or reloaded.
///
/// Every error names the file it concerns. Match on ``code`` to handle a kind of failure;
/// ``file`` and ``line`` say where it was thrown. Two errors are equal when all else is,
/// wherever they were thrown.
public struct MediaError: Error, Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The kind of failure.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private enum Base: String, Sendable, Hashable {
            case unreadable, unwritable, badMagic, malformedHeader, unsupportedMaxval, truncated, changedOnDisk
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// The file could not be opened or read.
        public static let unreadable = Code(.unreadable)
        /// The file could not be created or written.
        public static let unwritable = Code(.unwritable)
        /// The file does not start with `P5` (PGM) or `P6` (PPM).
        public static let badMagic = Code(.badMagic)
        /// The header is not a well-formed Netpbm header (a missing or non-numeric field, a
        /// zero or oversized dimension, no whitespace before the raster), or a sample
        /// exceeds the maxval.
        public static let malformedHeader = Code(.malformedHeader)
        /// The maxval is above 255 (two-byte samples, which memwarn does not decode).
        public static let unsupportedMaxval = Code(.unsupportedMaxval)
        /// The file ends before the raster does.
        public static let truncated = Code(.truncated)
        /// A released buffer, decoded again, no longer matches the checksum recorded at its
        /// first decode: the file changed on disk.
        public static let changedOnDisk = Code(.changedOnDisk)

        public var description: String { base.rawValue }
    }

    /// The fields, their description and their equality (shared with the package's other errors).
    private var backing: ErrorBacking<Code>

    /// The kind of failure.
    public var code: Code {
        get { backing.code }
        set { backing.code = newValue }
    }
    /// What went wrong, in words.
    public var message: String {
        get { backing.message }
        set { backing.message = newValue }
    }
    /// The file concerned.
    public var path: String {
        get { backing.path ?? "" }
        set { backing.path = newValue }
    }
    /// The `errno` behind the failure, when a system call failed.
    public var errno: Int32? {
        get { backing.errno }
        set { backing.errno = newValue }
    }
    /// The source file that threw it (`#fileID`).
    public var file: String {
        get { backing.file }
        set { backing.file = newValue }
    }
    /// The line that threw it.
    public var line: Int {
        get { backing.line }
        set { backing.line = newValue }
    }

    /// Creates an error.
    ///
    /// - Parameters:
    ///   - code: the kind of failure.
    ///   - message: what went wrong, in words.
    ///   - path: the file concerned.
    ///   - errno: the `errno` behind the failure, when a system call failed.
    ///   - file: where it is thrown; the default is the caller's.
    ///   - line: where it is thrown; the default is the caller's.
    package init(_ code: Code, _ message: String, path: String, errno: Int32? = nil, file: String = #fileID, line: Int = #line) {
        backing = ErrorBacking(code, message, path: path, errno: errno, file: file, line: line)
    }

    /// The path and the message.
    public var description: String { backing.description }

    /// The description, the code and where it was thrown.
    public var debugDescription: String { backing.debugDescription }

    public static func == (lhs: MediaError, rhs: MediaError) -> Bool { lhs.backing == rhs.backing }

    public func hash(into hasher: inout Hasher) { hasher.combine(backing) }
}
