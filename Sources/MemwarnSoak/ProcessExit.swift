import Foundation

/// How a child process ended.
public struct ProcessExit: Sendable, Hashable, Codable {
    /// Its exit status, when it exited.
    public var status: Int32?
    /// The signal that killed it, when one did.
    public var signal: Int32?

    /// The shell's convention: the status, or 128 + the signal.
    public var code: Int32 { signal.map { 128 + $0 } ?? status ?? 0 }

    public init(status: Int32? = nil, signal: Int32? = nil) {
        self.status = status
        self.signal = signal
    }
}
