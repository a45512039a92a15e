/// Counters a service exported in its `/metrics`, summed and checked before the soak makes a
/// figure of them: a sum is a count when no counter in it is NaN or below 0 and it is at most
/// ``largestCount`` (2^53, past which a `Double` no longer counts by ones). A counter of `1e19`,
/// or two samples of `1e308` (whose sum is +Inf), gives no count but the reason, which the
/// report says in the count's place.
package enum CounterSum: Sendable, Hashable {
    /// The sum, a count.
    case count(Double)
    /// Why the sum is no count, as the end of a sentence that begins "the service's counters":
    /// `sum to more than 2^53`, `are below 0`, `are not finite`.
    case unreadable(String)

    /// The largest sum read as a count: 2^53. Past it a `Double` cannot rise by one, and no
    /// service counts that many requests.
    package static let largestCount: Double = 0x1p53

    /// The sum of `values` (one counter's samples, or several counters' sums), checked.
    ///
    /// - Parameter values: the counters, each as the service gave it or as it summed.
    package init(_ values: some Sequence<Double>) {
        let values = Array(values)
        // Each reason is looked for among all the values, so the order they come in (a
        // dictionary's) does not change which one is said.
        if values.contains(where: \.isNaN) {
            self = .unreadable("are not finite")
        } else if values.contains(where: { $0 < 0 }) {
            self = .unreadable("are below 0")
        } else {
            // Every value is 0 or more: the sum is +Inf at worst, and that is past the bound.
            let sum = values.reduce(0, +)
            self = sum <= Self.largestCount ? .count(sum) : .unreadable("sum to more than 2^53")
        }
    }

    /// The count, or `nil` when the sum is none.
    package var count: Double? {
        guard case .count(let count) = self else { return nil }
        return count
    }

    /// Why the sum is no count, a sentence naming what the counters count
    /// (`the service's request counters sum to more than 2^53`); `nil` for a count.
    ///
    /// - Parameter counters: what the counters are, as in "the service's `counters`".
    package func reason(_ counters: String = "counters") -> String? {
        guard case .unreadable(let why) = self else { return nil }
        return "the service's \(counters) \(why)"
    }
}
