/// A documented change of state and the callbacks it delivers, in order.
///
/// The legal transitions, as Apple documents them for apps and scenes (anything else is a
/// ``LifeCycleError/Code/illegalTransition``):
///
/// | from | to | callbacks |
/// |---|---|---|
/// | not running | inactive | `willFinishLaunching`, `didFinishLaunching` (launch into the foreground) |
/// | not running | background | `willFinishLaunching`, `didFinishLaunching`, `didEnterBackground` (launch into the background) |
/// | inactive | active | `didBecomeActive` |
/// | active | inactive | `willResignActive` |
/// | inactive | background | `didEnterBackground` (under a deadline: save here) |
/// | background | inactive | `willEnterForeground` |
/// | background | suspended | none (the system's move, once state is saved and no background task runs) |
/// | suspended | background | `didEnterBackground` (resumed to run in the background); none on the way to the foreground |
/// | inactive, active, background | not running | `willTerminate` (under a deadline) |
/// | suspended | not running | none (discarded: a suspended unit runs no code, as on iOS) |
///
/// The launch callbacks run in the state launched into; the other `will…` callbacks in the
/// state being left, the `did…` ones in the state entered.
public struct LifeCycleTransition: Sendable, Hashable, CustomStringConvertible {
    /// The state left.
    public let from: LifeCycleState
    /// The state entered.
    public let to: LifeCycleState
    /// The callbacks delivered, in order.
    public let callbacks: [LifeCycleCallback]

    /// Every legal transition.
    public static let all: [LifeCycleTransition] = [
        .init(.notRunning, .inactive, [.willFinishLaunching, .didFinishLaunching]),
        .init(.notRunning, .background, [.willFinishLaunching, .didFinishLaunching, .didEnterBackground]),
        .init(.inactive, .active, [.didBecomeActive]),
        .init(.active, .inactive, [.willResignActive]),
        .init(.inactive, .background, [.didEnterBackground]),
        .init(.background, .inactive, [.willEnterForeground]),
        .init(.background, .suspended, []),
        .init(.suspended, .background, [.didEnterBackground]),
        .init(.inactive, .notRunning, [.willTerminate]),
        .init(.active, .notRunning, [.willTerminate]),
        .init(.background, .notRunning, [.willTerminate]),
        .init(.suspended, .notRunning, []),
    ]

    /// The callbacks delivered when the transition is one step on the way to `destination`: a
    /// suspended subject resumed on its way to the foreground is not told `didEnterBackground`
    /// (it gets `willEnterForeground` next); resumed to stay in the background, it is, as the
    /// seeds' background sequence has it ("The system resumes the app. UIKit calls the app
    /// delegate's `applicationDidEnterBackground(_:)` method").
    ///
    /// - Parameter destination: the state the whole request moves to.
    /// - Returns: the callbacks, in order; possibly none.
    package func callbacks(onTheWayTo destination: LifeCycleState) -> [LifeCycleCallback] {
        from == .suspended && to == .background && destination != .background ? [] : callbacks
    }

    /// The legal transition between two states, or `nil`.
    ///
    /// - Parameters:
    ///   - from: the state left.
    ///   - to: the state entered.
    /// - Returns: the transition, or `nil` when it is not legal.
    package static func between(_ from: LifeCycleState, _ to: LifeCycleState) -> LifeCycleTransition? {
        all.first { $0.from == from && $0.to == to }
    }

    /// The states to pass through, in order, to get from `from` to `to` by legal transitions
    /// (empty when they are equal). Only a path *to* ``LifeCycleState/notRunning`` goes
    /// through it: reaching another state never terminates on the way.
    ///
    /// - Parameters:
    ///   - from: the state to start from.
    ///   - to: the state to reach.
    /// - Returns: the states after `from`, ending with `to`; empty when `to` is `from` or
    ///   cannot be reached.
    package static func path(from: LifeCycleState, to: LifeCycleState) -> [LifeCycleState] {
        var previous: [LifeCycleState: LifeCycleState] = [:]
        var queue = [from]
        var seen: Set = [from]
        while !queue.isEmpty {
            let state = queue.removeFirst()
            if state == to { break }
            for transition in all
            where transition.from == state && !seen.contains(transition.to)
                && (transition.to != .notRunning || to == .notRunning)
            {
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
