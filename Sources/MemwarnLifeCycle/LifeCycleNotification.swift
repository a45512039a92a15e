public import MemwarnRelease

/// One life-cycle event, as ``LifeCycleApplication/notifications()`` delivers them.
public struct LifeCycleNotification: Sendable, Hashable, CustomStringConvertible {
    /// What happened.
    public enum Event: Sendable, Hashable {
        /// A callback was delivered: the subject's delegate method returned (or threw, or was
        /// cut off at its deadline). UIKit posts its notifications at this point — "after calling
        /// this method, the app also posts `UIApplicationDidBecomeActiveNotification`".
        case callback(LifeCycleCallback)
        /// The subject's state changed.
        case stateChanged(from: LifeCycleState, to: LifeCycleState)
        /// A callback's handler threw or overran its deadline.
        case handler(LifeCycleCallback, HandlerOutcome)
        /// A suspended unit was terminated to free memory (no `willTerminate`); its consumers
        /// were released and unregistered. Asking for it again relaunches it from its saved state.
        case discarded(freedBytes: Int)
        /// Idle shared-resource handles were closed on entering the background.
        case closedIdleHandles(count: Int, failures: Int)
        /// A background task began (``LifeCycleUnit/beginBackgroundTask(name:expirationHandler:)``).
        case backgroundTaskBegan(BackgroundTaskIdentifier, name: String)
        /// A background task ended: ended by its unit, or for it after it expired.
        case backgroundTaskEnded(BackgroundTaskIdentifier, name: String)
        /// The background time ran out: the task's expiration handler runs now, with the task
        /// still held (it may end it, as Apple's sample does); a task it leaves running is then
        /// ended for it. Either way ``backgroundTaskEnded(_:name:)`` follows.
        case backgroundTaskExpired(BackgroundTaskIdentifier, name: String)
        /// A memory warning was delivered: the application's delegate and then every running
        /// unit's were told (`didReceiveMemoryWarning`) — UIKit's
        /// `UIApplicationDidReceiveMemoryWarningNotification`. Posted once per warning, for the
        /// application, after the delegates.
        case memoryWarning(level: MemoryPressureLevel)
        /// The API was misused (ending an unknown or ended task, for example); nothing changed.
        case misuse(String)
    }

    /// Whose event.
    public var subject: LifeCycleSubject
    /// What happened.
    public var event: Event

    /// A notification of an event.
    ///
    /// - Parameters:
    ///   - subject: whose event.
    ///   - event: what happened.
    package init(subject: LifeCycleSubject, event: Event) {
        self.subject = subject
        self.event = event
    }

    public var description: String {
        switch event {
        case .callback(let callback): "\(subject): \(callback)"
        case .stateChanged(let from, let to): "\(subject): \(from) → \(to)"
        case .handler(let callback, let outcome): "\(subject): \(callback) \(outcome)"
        case .discarded(let freed): "\(subject): discarded, \(freed) bytes freed"
        case .closedIdleHandles(let count, let failures): "\(subject): closed \(count) idle handles (\(failures) failed)"
        case .backgroundTaskBegan(let id, let name): "\(subject): background task \(id) \"\(name)\" began"
        case .backgroundTaskEnded(let id, let name): "\(subject): background task \(id) \"\(name)\" ended"
        case .backgroundTaskExpired(let id, let name): "\(subject): background task \(id) \"\(name)\" expired"
        case .memoryWarning(let level): "\(subject): memory warning (\(level))"
        case .misuse(let message): "\(subject): misuse: \(message)"
        }
    }
}
