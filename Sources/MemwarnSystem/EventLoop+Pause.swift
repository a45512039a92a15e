extension EventLoop {
    /// Stops delivering a registration's events for `quiet`, then watches it for `events` again.
    ///
    /// What the descriptor signalled meanwhile is not lost: epoll looks at a descriptor again when
    /// its events are changed, so one that became readable during the pause fires as soon as the
    /// pause ends. A registration unwatched during the pause stays unwatched. A pause of zero
    /// or less does nothing: the descriptor stays watched.
    ///
    /// - Parameters:
    ///   - registration: a watched descriptor.
    ///   - quiet: how long to stop listening.
    ///   - events: what to watch it for afterwards.
    ///   - resumeFailed: called on the loop's thread when it cannot be watched again (`epoll_ctl`
    ///     failed): it stays paused.
    /// - Returns: whether it was paused (not for a pause of zero or less).
    /// - Throws: ``SystemError`` from `epoll_ctl(MOD)` when it cannot be paused: it goes on firing.
    @discardableResult
    package func pause(
        _ registration: Registration, for quiet: Duration, thenWatch events: EpollEvents = .readable,
        resumeFailed: @escaping (SystemError) -> Void
    ) throws(SystemError) -> Bool {
        guard quiet > .zero else { return false }
        try rewatch(registration, for: .none)
        schedule(at: now + quiet) { [unowned self] in
            guard isWatching(registration) else { return }
            do throws(SystemError) {
                try rewatch(registration, for: events)
            } catch {
                resumeFailed(error)
            }
        }
        return true
    }
}
