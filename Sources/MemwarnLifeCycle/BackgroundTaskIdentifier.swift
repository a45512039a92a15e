/// Names one background task of a ``LifeCycleUnit``, as `UIBackgroundTaskIdentifier` does.
public struct BackgroundTaskIdentifier: Sendable, Hashable, CustomStringConvertible {
    /// The task's number in its unit, counted from 1; 0 is ``invalid``.
    public let rawValue: Int

    /// What ``LifeCycleUnit/beginBackgroundTask(name:expirationHandler:)`` returns when it cannot
    /// start a task (the unit is suspended or not running, or its background time is used up).
    public static let invalid = BackgroundTaskIdentifier(rawValue: 0)

    /// The identifier with this number.
    ///
    /// - Parameter rawValue: the task's number; 0 is ``invalid``.
    package init(rawValue: Int) { self.rawValue = rawValue }

    public var description: String { self == .invalid ? "invalid" : "#\(rawValue)" }
}

/// A running background task.
struct BackgroundTask: Sendable {
    var name: String
    var expirationHandler: (@Sendable () -> Void)?
}
