extension Duration {
    /// Whole microseconds, rounded down.
    package var microseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000_000 + attoseconds / 1_000_000_000_000
    }

    /// Whole milliseconds, rounded down.
    package var wholeMilliseconds: Int64 {
        components.seconds * 1_000 + components.attoseconds / 1_000_000_000_000_000
    }

    /// Whole milliseconds, rounded up: a wait of this long never ends early.
    package var roundedUpMilliseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
    }

    /// The duration in seconds, as a `Double`.
    package var seconds: Double {
        let (whole, attoseconds) = components
        return Double(whole) + Double(attoseconds) / 1e18
    }
}

extension ContinuousClock.Instant {
    /// Seconds since a fixed instant early in the process: a plain number for the pure logic
    /// that fits lines through readings.
    package var secondsSinceStart: Double { (self - processStartInstant).seconds }
}

private let processStartInstant = ContinuousClock.now
