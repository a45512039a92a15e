/// Measures how fast memory grows: a least-squares line through the monitor's recent readings.
///
/// Each point is a reading's usage plus the bytes memwarn's own releases have given back so far
/// (``ReleaseLedger``), so a service that keeps allocating reads as a steady climb even while
/// releases keep its usage down. A reading more than ``breakTolerance`` of the capacity below the
/// last one (memory freed by something else, such as the service itself or a release on
/// request) or above where the line would be by now (a sudden allocation, such as a service
/// loading its data at start) starts the fit anew: the trend before a break says nothing about the one after. The tolerance is wide on
/// purpose: a narrower one would cut a noisy flat load into its rising runs and read them as
/// growth. Pure logic: no clock, no I/O.
struct GrowthEstimator: Sendable {
    /// A reading this share of the capacity below the last, or above the line, restarts the fit.
    static let breakTolerance = 0.10
    /// The most points kept; older ones go first.
    static let maximumPoints = 256

    struct Point: Sendable, Hashable {
        /// Monotonic time in seconds.
        var seconds: Double
        /// Usage plus the bytes memwarn has released so far.
        var bytes: Double
    }

    /// The span of time fitted.
    var windowSeconds: Double
    private(set) var points: [Point] = []

    init(window: Duration) {
        windowSeconds = window.seconds
    }

    /// Adds a reading.
    ///
    /// - Parameters:
    ///   - seconds: when it was taken (monotonic).
    ///   - bytes: usage plus the bytes memwarn's releases have freed so far.
    ///   - capacityBytes: the effective limit (for the fall tolerance).
    /// - Complexity: O(n) for the n points in the window (at most ``maximumPoints``).
    mutating func add(seconds: Double, bytes: Double, capacityBytes: Double) {
        if let last = points.last {
            if seconds <= last.seconds {
                points[points.count - 1].bytes = bytes
                return
            }
            // A jump above where the line would be by now, or a fall below the last reading; a
            // pause (usage where it was) is no break, only a flatter line.
            let slope = max(0, estimate?.bytesPerSecond ?? 0)
            let tolerance = Self.breakTolerance * capacityBytes
            if bytes > last.bytes + slope * (seconds - last.seconds) + tolerance || bytes < last.bytes - tolerance {
                points.removeAll(keepingCapacity: true)
            }
        }
        points.append(Point(seconds: seconds, bytes: bytes))
        let oldest = seconds - windowSeconds
        if let keep = points.firstIndex(where: { $0.seconds >= oldest }), keep > 0 { points.removeFirst(keep) }
        if points.count > Self.maximumPoints { points.removeFirst(points.count - Self.maximumPoints) }
    }

    /// Forgets every point (the cgroup's limit changed, or the monitor restarted).
    mutating func reset() { points.removeAll() }

    /// The fitted line, or `nil` with fewer than two points or no time between them.
    ///
    /// - Complexity: O(n) for the n points in the window (at most ``maximumPoints``).
    var estimate: GrowthEstimate? {
        let n = Double(points.count)
        guard points.count >= 2, let first = points.first, let last = points.last, last.seconds > first.seconds else { return nil }
        let meanX = points.reduce(0) { $0 + $1.seconds } / n
        let meanY = points.reduce(0) { $0 + $1.bytes } / n
        var sxx = 0.0
        var sxy = 0.0
        for point in points {
            let dx = point.seconds - meanX
            sxx += dx * dx
            sxy += dx * (point.bytes - meanY)
        }
        let slope = sxy / sxx
        var confidence = 0.0
        if points.count > 2 {
            var residuals = 0.0
            for point in points {
                let residual = point.bytes - (meanY + slope * (point.seconds - meanX))
                residuals += residual * residual
            }
            let standardError = (residuals / (n - 2) / sxx).squareRoot()
            // Points on the line (to a byte) leave no doubt.
            confidence = standardError * (last.seconds - first.seconds) < 1 ? (slope > 0 ? .infinity : slope < 0 ? -.infinity : 0) : slope / standardError
        }
        return GrowthEstimate(bytesPerSecond: slope, samples: points.count, spanSeconds: last.seconds - first.seconds, confidence: confidence)
    }
}

/// How fast usage grows, as the monitor measured it.
public struct GrowthEstimate: Sendable, Hashable {
    /// The slope of the fitted line: bytes a second (negative when usage falls).
    public var bytesPerSecond: Double
    /// The readings it was fitted on.
    package var samples: Int
    /// The time between the first and last of them, in seconds.
    package var spanSeconds: Double
    /// The slope over its standard error (a t statistic): how clearly the readings climb rather
    /// than scatter. Infinite when they lie on the line; 0 with only two readings.
    public var confidence: Double

    /// Creates an estimate.
    ///
    /// - Parameters:
    ///   - bytesPerSecond: the fitted slope, in bytes a second.
    ///   - samples: the number of readings fitted.
    ///   - spanSeconds: the time the readings span, in seconds.
    ///   - confidence: the slope over its standard error.
    package init(bytesPerSecond: Double, samples: Int, spanSeconds: Double, confidence: Double) {
        self.bytesPerSecond = bytesPerSecond
        self.samples = samples
        self.spanSeconds = spanSeconds
        self.confidence = confidence
    }

    /// The rate a release's headroom is sized with: the slope when at least three readings
    /// climb with a confidence of 2 or more, else 0 (scatter is not growth).
    public var sustainedBytesPerSecond: Double {
        samples >= 3 && confidence >= 2 && bytesPerSecond > 0 ? bytesPerSecond : 0
    }
}
