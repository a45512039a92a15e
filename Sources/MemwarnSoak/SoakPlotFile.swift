import Foundation

/// The soak's plot file (`memwarn soak --plot`): the one writer of the SVG. The soak rewrites it
/// every 5 s while it runs (``rewriting(every:report:)``), so that an interrupted soak keeps its
/// evidence; `memwarn soak` writes it once more from the final report.
package struct SoakPlotFile: Sendable {
    /// Where the plot goes.
    package let path: String

    /// The plot file at `path` (nothing is written yet).
    ///
    /// - Parameter path: where the plot goes.
    package init(path: String) {
        self.path = path
    }

    /// Makes the file, empty (or empties it), so that a path that cannot be written is found
    /// before the soak starts.
    ///
    /// - Returns: whether it could be made; when not, `errno` says why.
    package func create() -> Bool {
        FileManager.default.createFile(atPath: path, contents: nil)
    }

    /// Writes the plot of `report` over the file: a new file renamed over the name.
    ///
    /// - Parameter report: the soak's report, final or as far as it went.
    /// - Throws: the error of the write.
    package func write(_ report: SoakReport) throws {
        try SoakPlot.svg(report).write(toFile: path, atomically: true, encoding: .utf8)
    }

    /// Rewrites the file from `report` every `interval` (best effort: a failed write is tried
    /// again at the next), until the task is cancelled.
    ///
    /// - Parameters:
    ///   - interval: how often.
    ///   - report: the report as far as the soak went.
    /// - Returns: the task that writes; cancel it, then await it, before the final write.
    func rewriting(every interval: Duration, report: @escaping @Sendable () -> SoakReport) -> Task<Void, Never> {
        Task {
            while !Task.isCancelled {
                try? await Task.sleep(for: interval)
                if Task.isCancelled { break }
                try? write(report())
            }
        }
    }
}
