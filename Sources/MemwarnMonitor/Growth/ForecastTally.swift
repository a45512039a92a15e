/// How the monitor's forecast warnings turned out.
///
/// A forecast warning is **confirmed** when usage, with what memwarn released since added back,
/// reaches the warning mark within twice the predicted time to it plus a second (the growth it
/// foresaw happened, whether or not the release then kept usage down), and **false** when that
/// deadline passes first (the service stopped growing: the warning woke it for nothing).
package struct ForecastTally: Sendable, Hashable, Codable {
    /// Forecast warnings raised (rises to `.warning` whose source is `forecast`).
    package var raised = 0
    /// Those whose growth came.
    package var confirmed = 0
    /// Those whose growth did not come.
    package var falseAlarms = 0

    /// An empty tally.
    package init() {}
}
