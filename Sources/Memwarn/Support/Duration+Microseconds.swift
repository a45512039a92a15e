extension Duration {
    /// Whole microseconds.
    var microseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000_000 + attoseconds / 1_000_000_000_000
    }

    /// The duration in seconds, as a `Double`.
    var seconds: Double {
        let (whole, attoseconds) = components
        return Double(whole) + Double(attoseconds) / 1e18
    }
}

extension ContinuousClock.Instant {
    /// Seconds since a fixed instant early in the process: a plain number for the pure logic
    /// that fits lines through readings.
    var secondsSinceStart: Double { (self - processStartInstant).seconds }
}

private let processStartInstant = ContinuousClock.now
