extension MemoryTrend {
    /// The trend of a soak's loaded service: from ready until the soak began to stop it (not its
    /// start-up, its check or its shutdown). Without the consumers' footprint (no control
    /// endpoint answered), the falls of its anonymous memory under pressure are counted: they
    /// make the floor unknowable from outside. Polls that gave no sample (memory fell while the
    /// service answered) are counted.
    ///
    /// - Parameters:
    ///   - telemetry: what the service reported, with its floor samples.
    ///   - levelChanges: the level changes of its run.
    ///   - ready: seconds from the start until it was ready.
    ///   - stop: seconds from the start until the soak began to stop it.
    ///   - limitBytes: its limit.
    static func ofLoadedService(
        _ telemetry: ServiceTelemetry, levelChanges: [ConstrainedRunReport.LevelChange], from ready: Double, until stop: Double, limitBytes: UInt64
    ) -> MemoryTrend {
        let basis = telemetry.linksMemwarn ? "anonymous memory less the consumers' footprint" : "anonymous memory"
        let falls =
            telemetry.linksMemwarn
            ? nil
            : fallsUnderPressure(
                telemetry.floorSamples.filter { $0.seconds >= ready && $0.seconds < stop }, levelChanges: levelChanges, limitBytes: limitBytes)
        var trend = analyse(
            loadedSamples(telemetry.floorSamples, from: ready, until: stop), spanSeconds: max(0, stop - ready), limitBytes: limitBytes, basis: basis,
            fallsUnderPressure: falls)
        trend.samplesLeftOut = telemetry.floorSamplesLeftOut.count { $0 >= ready && $0 < stop }
        return trend
    }

    /// The floor samples of the loaded service: from ready until the soak began to stop it,
    /// their times counted from ready.
    static func loadedSamples(_ samples: [Sample], from ready: Double, until stop: Double) -> [Sample] {
        samples.filter { $0.seconds >= ready && $0.seconds < stop }.map { sample in
            var shifted = sample
            shifted.seconds -= ready
            return shifted
        }
    }
}
