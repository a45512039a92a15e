/// An assertion of a scenario that did not hold: its message is the FAIL line's reason.
struct ScenarioFailure: Error, CustomStringConvertible {
    let description: String

    init(_ description: String) {
        self.description = description
    }
}

/// Asserts `condition`; otherwise the scenario fails with `message`.
func expect(_ condition: Bool, _ message: @autoclosure () -> String) throws(ScenarioFailure) {
    guard condition else { throw ScenarioFailure(message()) }
}

/// Unwraps `value`; otherwise the scenario fails with `message`.
func require<Value>(_ value: Value?, _ message: @autoclosure () -> String) throws(ScenarioFailure) -> Value {
    guard let value else { throw ScenarioFailure(message()) }
    return value
}
