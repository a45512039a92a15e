import CgroupKit
import MemwarnControl
import MemwarnMonitor
import MemwarnSoak
import MemwarnStores
import MemwarnSystem

/// One parser under the fuzzer: it gets arbitrary bytes and may throw any of its documented
/// errors. A crash, a trap, a hang or a runaway allocation is the finding.
struct FuzzTarget: Sendable {
    let name: String
    /// The fixture files (paths relative to the repository) that seed its corpus.
    let seeds: [String]
    let run: @Sendable ([UInt8]) -> Void

    static let all: [FuzzTarget] = [
        FuzzTarget(name: "proc-cgroup", seeds: ["proc/self/cgroup"]) { _ = try? CgroupMembership.parse(text($0), path: "cgroup") },
        FuzzTarget(name: "mountinfo", seeds: ["proc/self/mountinfo"]) { _ = try? MountEntry.parse(text($0), path: "mountinfo") },
        FuzzTarget(name: "cgroup-values", seeds: ["memory.stat", "memory.events", "memory.max", "memory.current", "memory.limit_in_bytes"]) { bytes in
            let text = text(bytes)
            _ = try? CgroupValues.number(text, path: "value")
            _ = try? CgroupValues.limit(text, path: "limit")
            _ = try? CgroupValues.flatKeyed(text, path: "memory.stat")
        },
        FuzzTarget(name: "psi", seeds: ["proc/pressure/memory", "memory.pressure"]) { _ = try? PressureStall.parse(text($0), path: "memory.pressure") },
        FuzzTarget(name: "meminfo", seeds: ["proc/meminfo"]) { _ = try? SystemMemory.parse(text($0), path: "meminfo") },
        FuzzTarget(name: "usage-file", seeds: ["memory.current", "memory.usage_in_bytes", "proc/meminfo"]) { bytes in
            // What adaptive sampling parses in place, hundreds of times a second: a byte count, or /proc/meminfo's start.
            bytes.withUnsafeBytes { raw in
                _ = try? UsageFile.parseBytes(raw, path: "memory.current")
                _ = try? UsageFile.parseMeminfo(raw, path: "meminfo")
            }
        },
        FuzzTarget(name: "policy-file", seeds: ["Config/memwarn.conf"]) { bytes in
            var policy = PressurePolicy()
            if (try? policy.apply(fileText: text(bytes), path: "memwarn.conf")) != nil { _ = try? policy.validate() }
        },
        FuzzTarget(name: "policy-environment", seeds: []) { bytes in
            // Lines "KEY=value" as the environment.
            var environment: [String: String] = [:]
            for line in text(bytes).split(separator: "\n") {
                let parts = line.split(separator: "=", maxSplits: 1)
                if parts.count == 2 { environment[String(parts[0])] = String(parts[1]) }
            }
            _ = try? PressurePolicy.load(environment: environment)
        },
        FuzzTarget(name: "sizes", seeds: []) { _ = ByteSize.parse(text($0)) },
        FuzzTarget(name: "durations", seeds: []) { _ = PressurePolicy.parseDuration(text($0)) },
        FuzzTarget(name: "growth-rates", seeds: []) { _ = PressurePolicy.parseGrowthRate(text($0)) },
        FuzzTarget(name: "control-request", seeds: []) { _ = try? ControlRequest(line: $0) },
        FuzzTarget(name: "control-reply", seeds: []) { _ = try? ControlReply(line: $0) },
        FuzzTarget(name: "ppm", seeds: []) { _ = try? PortablePixmap.decode($0, path: "fuzz.ppm") },
    ]

    static func named(_ name: String) -> FuzzTarget? { all.first { $0.name == name } }

    private static func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }
}
