import Foundation

/// The series rows of the article "Metrics, series by series" (`MetricsReference.md`), which
/// tests compare with what memwarn reports.
package enum ArticleRows {
    /// The article's path in this checkout.
    package static let metricsArticle = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Memwarn/Docs.docc/MetricsReference.md").path

    /// The series its tables name: the first cell of each row that names one (`` | `memwarn_level` | ``).
    ///
    /// - Throws: when the article cannot be read.
    package static func metricsSeries() throws -> [String] {
        try String(contentsOfFile: metricsArticle, encoding: .utf8).split(separator: "\n").compactMap { line in
            guard line.hasPrefix("| `memwarn_") else { return nil }
            return String(line.dropFirst(3).prefix { $0 != "`" })
        }
    }
}
