/// A child process did not do what the harness expected: it ended, said nothing in time, or
/// answered something else.
public struct ChildProcessError: Error, CustomStringConvertible, Sendable {
    /// What happened, with the child's last words where it had any.
    public var description: String

    /// - Parameter description: what happened.
    public init(_ description: String) { self.description = description }
}
