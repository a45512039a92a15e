import Foundation
import MemwarnSystem

/// The soak as an SVG: memory usage against the limit over time, one panel per run, with the
/// warning, critical, terminate and OOM-kill moments marked. Written by ``SoakPlotFile`` alone.
enum SoakPlot {
    static let width = 960.0
    static let panelHeight = 260.0
    static let margin = (left: 70.0, right: 20.0, top: 58.0, bottom: 44.0)
    static let colors = ["memwarn": "#1f77b4", "baseline": "#d62728"]

    /// The longest line of the title, in characters (15 px bold across the plot's width).
    static let titleWidth = 96
    /// The distance between two lines of the title.
    static let titleLineHeight = 18.0

    static func svg(_ report: SoakReport) -> String {
        let panels = report.runs.count
        // The whole command, wrapped at spaces: never cut (a port cut to its first digit reads as another port).
        let title = wrap(
            "memwarn soak: \(report.subject) under \(report.limits.map(ByteSize.describe).joined(separator: ", ")), usage over time", width: titleWidth)
        let titleExtra = Double(max(0, title.count - 1)) * titleLineHeight
        let height = margin.top + titleExtra + Double(panels) * (panelHeight + margin.bottom) + 30
        let maximumSeconds = max(report.runs.map(\.run.durationSeconds).max() ?? 1, report.durationSeconds, 1)
        var parts = [
            ##"<svg xmlns="http://www.w3.org/2000/svg" width="\##(Int(width))" height="\##(Int(height))" viewBox="0 0 \##(Int(width)) \##(Int(height))" font-family="sans-serif" font-size="12">"##,
            ##"<rect width="100%" height="100%" fill="white"/>"##,
        ]
        for (index, line) in title.enumerated() {
            parts.append(
                ##"<text x="\##(margin.left)" y="\##(22 + Double(index) * titleLineHeight)" font-size="15" font-weight="bold">\##(escape(line))</text>"##)
        }
        for (index, run) in report.runs.enumerated() {
            let top = margin.top + titleExtra + Double(index) * (panelHeight + margin.bottom)
            parts += panel(
                run, title: run.memwarnEnabled ? report.ranName(run) : "without memwarn (baseline)", top: top, maximumSeconds: maximumSeconds,
                limit: run.memoryMaxBytes)
        }
        let legendY = height - 12
        parts.append(##"<g font-size="11">"##)
        var x = margin.left
        for (label, color, dash) in [
            ("usage", "#333", ""), ("limit", "#000", "6,3"), (report.memwarnInService ? "warning (with memwarn: a release)" : "warning", "#e6a700", ""),
            ("critical (likewise)", "#d62728", ""),
            ("unit terminated", "#2ca02c", ""), ("trough (floor)", "#9467bd", ""), ("OOM kill", "#000", ""),
        ] {
            parts.append(
                ##"<line x1="\##(x)" y1="\##(legendY - 4)" x2="\##(x + 18)" y2="\##(legendY - 4)" stroke="\##(color)" stroke-width="2"\##(dash.isEmpty ? "" : ##" stroke-dasharray="\##(dash)""##)/>"##
            )
            parts.append(##"<text x="\##(x + 22)" y="\##(legendY)">\##(label)</text>"##)
            x += 22 + Double(label.count) * 6.5 + 18
        }
        parts.append("</g>")
        parts.append("</svg>")
        return parts.joined(separator: "\n") + "\n"
    }

    private static func panel(_ run: SoakRun, title: String, top: Double, maximumSeconds: Double, limit: UInt64) -> [String] {
        let plotWidth = width - margin.left - margin.right
        let ceiling = Double(limit) * 1.1
        func x(_ seconds: Double) -> Double { margin.left + plotWidth * min(max(seconds / maximumSeconds, 0), 1) }
        func y(_ bytes: Double) -> Double { top + panelHeight * (1 - min(max(bytes / ceiling, 0), 1)) }
        let color = colors[run.label] ?? "#333"
        let outcome = run.survived ? "survived" : "killed after \(String(format: "%.1f", run.run.durationSeconds)) s"
        var parts = [
            ##"<g>"##,
            ##"<text x="\##(margin.left)" y="\##(top - 8)" font-weight="bold" fill="\##(color)">\##(escape(title)): \##(escape(outcome)), \##(run.run.oomKills) OOM kill\##(run.run.oomKills == 1 ? "" : "s"), \##(run.demo.map { "\($0.terminations.count) units terminated" } ?? "\(run.service.releases) releases"), trend: \##(escape(run.trend.verdict.rawValue))</text>"##,
            ##"<rect x="\##(margin.left)" y="\##(top)" width="\##(plotWidth)" height="\##(panelHeight)" fill="none" stroke="#999"/>"##,
        ]
        // Axes: MiB on the left, seconds below.
        let step = niceStep(ceiling / 1_048_576 / 5)
        var mebibytes = 0.0
        while mebibytes * 1_048_576 <= ceiling {
            let ty = y(mebibytes * 1_048_576)
            parts.append(##"<line x1="\##(margin.left - 4)" y1="\##(ty)" x2="\##(margin.left + plotWidth)" y2="\##(ty)" stroke="#eee"/>"##)
            parts.append(##"<text x="\##(margin.left - 8)" y="\##(ty + 4)" text-anchor="end">\##(Int(mebibytes)) MiB</text>"##)
            mebibytes += step
        }
        let secondsStep = niceStep(maximumSeconds / 10)
        var seconds = 0.0
        while seconds <= maximumSeconds + 1e-9 {
            parts.append(##"<text x="\##(x(seconds))" y="\##(top + panelHeight + 16)" text-anchor="middle">\##(Int(seconds)) s</text>"##)
            seconds += secondsStep
        }
        parts.append(
            ##"<line x1="\##(margin.left)" y1="\##(y(Double(limit)))" x2="\##(margin.left + plotWidth)" y2="\##(y(Double(limit)))" stroke="#000" stroke-width="1.5" stroke-dasharray="6,3"/>"##
        )
        parts.append(
            ##"<text x="\##(margin.left + plotWidth - 4)" y="\##(y(Double(limit)) - 5)" text-anchor="end">limit \##(escape(ByteSize.describe(limit)))</text>"##)
        // Event marks: with memwarn, the releases the service made (at warning or critical);
        // without it, the level changes the outside monitor saw.
        let demoReleases = run.demo?.releases ?? []
        let marks =
            demoReleases.isEmpty
            ? run.run.levelChanges.filter { $0.level != "normal" }.map { (seconds: $0.seconds, level: $0.level, what: "\($0.level)") }
            : demoReleases.map { (seconds: $0.seconds, level: $0.level, what: "release at \($0.level): \(ByteSize.describe(reported: $0.freedBytes)) freed") }
        for mark in marks {
            let color = mark.level == "critical" ? "#d62728" : "#e6a700"
            parts.append(
                ##"<line x1="\##(x(mark.seconds))" y1="\##(top)" x2="\##(x(mark.seconds))" y2="\##(top + panelHeight)" stroke="\##(color)" stroke-width="1" opacity="0.7"><title>\##(escape(mark.what)) at \##(String(format: "%.2f", mark.seconds)) s</title></line>"##
            )
        }
        for termination in run.demo?.terminations ?? [] {
            parts.append(
                ##"<circle cx="\##(x(termination.seconds))" cy="\##(top + 8)" r="3.5" fill="#2ca02c"><title>\##(escape(termination.unit)) terminated, \##(escape(ByteSize.describe(reported: termination.freedBytes))) freed</title></circle>"##
            )
        }
        // Usage.
        if !run.run.samples.isEmpty {
            let points = run.run.samples.map { "\(String(format: "%.1f", x($0.seconds))),\(String(format: "%.1f", y(Double($0.usageBytes))))" }
            parts.append(##"<polyline fill="none" stroke="\##(color)" stroke-width="1.8" points="\##(points.joined(separator: " "))"/>"##)
        }
        // The troughs (the floor's lowest point in each window), and the floor itself.
        for trough in run.trend.troughs {
            parts.append(
                ##"<rect x="\##(x(trough.seconds) - 3)" y="\##(y(Double(trough.bytes)) - 3)" width="6" height="6" fill="#9467bd"><title>trough \##(escape(ByteSize.describe(trough.bytes))) at \##(String(format: "%.0f", trough.seconds)) s</title></rect>"##
            )
        }
        if let floor = run.trend.floorBytes {
            parts.append(
                ##"<line x1="\##(margin.left)" y1="\##(y(Double(floor)))" x2="\##(margin.left + plotWidth)" y2="\##(y(Double(floor)))" stroke="#9467bd" stroke-width="1" stroke-dasharray="2,3"/>"##
            )
            parts.append(##"<text x="\##(margin.left + 4)" y="\##(y(Double(floor)) - 4)" fill="#9467bd">floor \##(escape(ByteSize.describe(floor)))</text>"##)
        }
        if run.run.oomKills > 0 {
            let killX = x(run.run.durationSeconds)
            let killY = y(Double(limit))
            parts.append(
                ##"<path d="M \##(killX - 7) \##(killY - 7) L \##(killX + 7) \##(killY + 7) M \##(killX - 7) \##(killY + 7) L \##(killX + 7) \##(killY - 7)" stroke="#000" stroke-width="3"/>"##
            )
            parts.append(##"<text x="\##(killX + 10)" y="\##(killY + 16)" font-weight="bold">OOM kill</text>"##)
        }
        parts.append("</g>")
        return parts
    }

    /// `text` in lines of at most `width` characters, broken at spaces: a word is never cut (one
    /// longer than a line has a line of its own).
    static func wrap(_ text: String, width: Int) -> [String] {
        var lines: [String] = []
        var line = ""
        for word in text.split(separator: " ") {
            if line.isEmpty {
                line = String(word)
            } else if line.count + 1 + word.count <= width {
                line += " " + word
            } else {
                lines.append(line)
                line = String(word)
            }
        }
        if !line.isEmpty { lines.append(line) }
        return lines
    }

    /// 1, 2 or 5 times a power of ten, at least `rough`.
    static func niceStep(_ rough: Double) -> Double {
        guard rough > 0 else { return 1 }
        let power = pow(10, floor(log10(rough)))
        for factor in [1.0, 2, 5, 10] where factor * power >= rough { return factor * power }
        return 10 * power
    }

    static func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(of: ">", with: "&gt;")
    }
}
