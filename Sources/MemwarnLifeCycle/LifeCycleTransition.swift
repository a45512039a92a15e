/// A documented change of state and the callbacks it delivers, in order.
///
/// The legal transitions, as Apple documents them for apps and scenes (anything else is a
/// ``LifeCycleError/illegalTransition(subject:from:to:)``):
///
/// | from | to | callbacks |
/// |---|---|---|
/// | not running | inactive | `willFinishLaunching`, `didFinishLaunching` (launch into the foreground) |
/// | not running | background | `willFinishLaunching`, `didFinishLaunching` (launch into the background) |
/// | inactive | active | `didBecomeActive` |
/// | active | inactive | `willResignActive` |
/// | inactive | background | `didEnterBackground` (under a deadline: save here) |
/// | background | inactive | `willEnterForeground` |
/// | background | suspended | none (the system's move, once state is saved and no background task runs) |
/// | suspended | background | none (resumed: to run again, or on the way to the foreground) |
/// | inactive, active, background | not running | `willTerminate` (under a deadline) |
/// | suspended | not running | none (discarded: a suspended unit runs no code, as on iOS) |
public struct LifeCycleTransition: Sendable, Hashable, CustomStringConvertible {
    public let from: LifeCycleState
    public let to: LifeCycleState
    /// The callbacks delivered, in order.
    public let callbacks: [LifeCycleCallback]

    /// Every legal transition.
    public static let all: [LifeCycleTransition] = [
        .init(.notRunning, .inactive, [.willFinishLaunching, .didFinishLaunching]),
        .init(.notRunning, .background, [.willFinishLaunching, .didFinishLaunching]),
        .init(.inactive, .active, [.didBecomeActive]),
        .init(.active, .inactive, [.willResignActive]),
        .init(.inactive, .background, [.didEnterBackground]),
        .init(.background, .inactive, [.willEnterForeground]),
        .init(.background, .suspended, []),
        .init(.suspended, .background, []),
        .init(.inactive, .notRunning, [.willTerminate]),
        .init(.active, .notRunning, [.willTerminate]),
        .init(.background, .notRunning, [.willTerminate]),
        .init(.suspended, .notRunning, []),
    ]

    /// The legal transition between two states, or `nil`.
    public static func between(_ from: LifeCycleState, _ to: LifeCycleState) -> LifeCycleTransition? {
        all.first { $0.from == from && $0.to == to }
    }

    /// The states to pass through, in order, to get from `from` to `to` by legal transitions
    /// (empty when they are equal). Only a path *to* ``LifeCycleState/notRunning`` goes
    /// through it: reaching another state never terminates on the way.
    public static func path(from: LifeCycleState, to: LifeCycleState) -> [LifeCycleState] {
        var previous: [LifeCycleState: LifeCycleState] = [:]
        var queue = [from], seen: Set = [from]
        while !queue.isEmpty {
            let state = queue.removeFirst()
            if state == to { break }
            for transition in all where transition.from == state && !seen.contains(transition.to)
                && (transition.to != .notRunning || to == .notRunning) {
                seen.insert(transition.to)
                previous[transition.to] = state
                queue.append(transition.to)
            }
        }
        var path: [LifeCycleState] = []
        var state = to
        while state != from, let before = previous[state] {
            path.insert(state, at: 0)
            state = before
        }
        return path
    }

    private init(_ from: LifeCycleState, _ to: LifeCycleState, _ callbacks: [LifeCycleCallback]) {
        self.from = from
        self.to = to
        self.callbacks = callbacks
    }

    public var description: String { "\(from) → \(to)" }
}
