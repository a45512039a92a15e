extension Duration {
    /// The duration in whole milliseconds, for a scenario's details.
    var wholeMilliseconds: Int64 {
        components.seconds * 1_000 + components.attoseconds / 1_000_000_000_000_000
    }
}
