import MemwarnSystem

extension ByteSize {
    /// `12.0 MiB`, for a count of bytes another process gave (a service's status, the demo's
    /// lines): one below 0 reads as 0, never a trap.
    static func describe(reported bytes: Int) -> String { describe(UInt64(max(0, bytes))) }
}
