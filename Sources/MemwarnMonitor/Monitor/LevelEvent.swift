public import MemwarnRelease

/// A change of the memory-pressure level (or the first reading, with no previous level).
public struct LevelEvent: Sendable, Hashable {
    /// The new level.
    public var level: MemoryPressureLevel
    /// The level before; `nil` for the first reading.
    public var previous: MemoryPressureLevel?
    /// The signal that produced it.
    public var source: PressureSignal
    /// What the monitor read.
    public var snapshot: PressureSnapshot
    /// When memory runs out if it keeps growing as measured, or `nil` when usage is not
    /// clearly growing. A rise with source ``/MemwarnRelease/PressureSignal/forecast`` always carries one.
    public var forecast: PressureForecast?

    /// Creates an event.
    ///
    /// - Parameters:
    ///   - level: the new level.
    ///   - previous: the level before; `nil` for the first reading.
    ///   - source: the signal that produced it.
    ///   - snapshot: what the monitor read.
    ///   - forecast: the forecast, or `nil` when usage is not clearly growing.
    package init(
        level: MemoryPressureLevel, previous: MemoryPressureLevel?, source: PressureSignal, snapshot: PressureSnapshot,
        forecast: PressureForecast? = nil
    ) {
        self.level = level
        self.previous = previous
        self.source = source
        self.snapshot = snapshot
        self.forecast = forecast
    }
}
