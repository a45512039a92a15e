import MemwarnSystem

extension SoakLeg {
    /// What the leg shows as it goes, on each usage sample: the progress line, with the trend so
    /// far once every 5 s. It reads the run's record (``ConstrainedRun/recorder``), keeping none.
    ///
    /// - Parameters:
    ///   - launched: the leg's started service.
    ///   - readySeconds: when the service became ready, once it has (the trend's start).
    ///   - progress: called with each line's figures.
    func progressReporter(
        _ launched: LaunchedLeg, readySeconds: Locked<Double?>, progress: @escaping @Sendable (Soak.Progress) -> Void
    ) -> @Sendable (SoakSample) -> Void {
        let (label, limit, recorder, watch) = (self.label, self.limit, launched.run.recorder, launched.watch)
        let trendLine = Locked<(at: Double, text: String?)>((0, nil))
        return { sample in
            let telemetry = watch.current
            let trend = trendLine.withLock { last -> String? in
                guard sample.seconds - last.at >= 5 else { return last.text }
                let since = readySeconds.withLock { $0 } ?? sample.seconds
                let trend = MemoryTrend.ofLoadedService(
                    telemetry, levelChanges: recorder.levelChanges, from: since, until: sample.seconds, limitBytes: limit)
                last = (sample.seconds, trend.verdict == .tooShort ? nil : trend.verdict.rawValue)
                return last.text
            }
            progress(
                Soak.Progress(
                    label: label, memoryMaxBytes: limit, seconds: sample.seconds, usageBytes: sample.usageBytes,
                    level: recorder.level, releases: telemetry.linksMemwarn ? telemetry.releases : nil, trend: trend))
        }
    }

    /// The leg as far as it went, for the plot rewritten while the soak runs.
    ///
    /// - Parameters:
    ///   - launched: the leg's started service.
    ///   - readySeconds: when the service became ready, once it has (the trend's start).
    func liveRun(_ launched: LaunchedLeg, readySeconds: Locked<Double?>) -> @Sendable () -> SoakRun {
        let (label, memwarnEnabled, limit) = (self.label, self.memwarnEnabled, self.limit)
        return {
            let seconds = (ContinuousClock.now - launched.start).seconds
            let telemetry = launched.watch.current
            let recorder = launched.run.recorder
            return SoakRun(
                label: label, memwarnEnabled: memwarnEnabled, memoryMaxBytes: limit,
                run: .inProgress(
                    command: launched.command, cgroup: launched.run.cgroup.location.path, memoryMaxBytes: limit, seconds: seconds,
                    recorded: recorder),
                demo: nil, service: telemetry,
                trend: .ofLoadedService(
                    telemetry, levelChanges: recorder.levelChanges, from: readySeconds.withLock { $0 } ?? seconds, until: seconds, limitBytes: limit),
                end: .duration)
        }
    }
}
