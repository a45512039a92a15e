import CgroupKit
import Foundation
import MemwarnTestKit

/// memwarn inside a container, as Kubernetes runs one on cgroup v2: the pod's cgroup with its
/// `memory.max`, a cgroup namespace rooted there, cgroup2 mounted afresh (``ContainerEntry``).
/// Inside, `memwarn status` sees `/` with the pod's limit; `memwarn watch` (the library's
/// monitor) sees a hog in the pod cross the warning mark; `memwarn run` as the container's
/// entrypoint, alone in the pod's cgroup, moves itself into a leaf so that its command's cgroup
/// can have a limit, and runs it under that limit; with another process in the pod's cgroup it
/// refuses with the reason (cgroup v2's no-internal-processes rule).
enum ContainerScenario {
    static let scenario = Scenario(name: "container-cgroupns", timeLimit: .seconds(240), body: run)
    static let podLimit = 128 * mebibyte

    static func run(_ context: ScenarioContext) async throws {
        let pod = try context.makeCgroup(memoryMax: podLimit)

        let status = try await inContainer(context, pod, [context.products.memwarn, "status", "--json"])
        try expect(status.status == 0 && status.lines.count == 1, "memwarn status in the container: \(status.status), \(status.lines), \(status.errorTail)")
        let reading = try JSONObject.parse(status.lines[0])
        try expect(
            reading["mode"] as? String == "v2" && reading["cgroupPath"] as? String == "/" && reading["limitBytes"] as? Int == podLimit
                && reading["limitFile"] as? String == "memory.max" && reading["measure"] as? String == "cgroup",
            "inside, the container's cgroup is / with the pod's memory.max: \(reading)")
        context.note("status inside: cgroup /, limit 128 MiB from memory.max, level \(reading["level"] as? String ?? "?")")

        let watch = try LineChild(
            [context.products.scenarios, "--in-container", context.products.memwarn, "watch", "--json"], in: pod,
            environment: ScenarioContext.environment(adding: ["MEMWARN_POLL_INTERVAL": "250ms", "MEMWARN_RECHECK_INTERVAL": "250ms"]))
        defer { watch.killIfRunning() }
        let first = try JSONObject.parse(try await watch.nextLine(within: .seconds(20)))
        try expect(first["level"] as? String == "normal" && first["limitBytes"] as? Int == podLimit, "watch's first line: \(first)")
        let hog = try MemoryHog(in: pod, binary: context.products.hog)
        try await hog.hold(0.85, of: podLimit)
        let change = try JSONObject.parse(try await watch.nextLine(within: .seconds(20)))
        try expect(change["level"] as? String == "warning", "a hog at 85 % of the pod's limit: \(change)")
        context.note("watch inside: warning at ratio \(change["ratio"].map { "\($0)" } ?? "?") (source \(change["source"] as? String ?? "?"))")
        watch.signal(SIGTERM)
        _ = try await watch.exitStatus(within: .seconds(30))

        // Another process (the hog) shares the pod's cgroup: memwarn run cannot delegate memory.
        let shared = try await inContainer(context, pod, [context.products.memwarn, "run", "--memory-max", "32M", "--", context.products.hog])
        try expect(
            shared.status != 0 && shared.errorTail.contains("holds other processes") && shared.errorTail.contains("Delegate=yes"),
            "memwarn run beside another process: exit \(shared.status), stderr \(shared.errorTail)")
        context.note("run beside another process: exit \(shared.status), refused with the reason")
        await hog.stop()

        // The entrypoint: alone in the pod's cgroup, it moves into a leaf and runs the command limited.
        let entry = try await inContainer(
            context, pod,
            [
                context.products.memwarn, "run", "--memory-max", "32M", "--report", "/tmp/container-run.json",
                "--", context.products.hog, "--allocate", "\(64 * mebibyte)",
            ])
        let report = try JSONObject.parse(try String(contentsOfFile: "/tmp/container-run.json", encoding: .utf8))
        try expect(
            entry.status == 137 && report["oomKills"] as? Int == 1 && report["memoryMaxBytes"] as? Int == 32 * mebibyte
                && report["cgroupRemoved"] as? Bool == true,
            "memwarn run as the entrypoint: exit \(entry.status), report \(report), stderr \(entry.errorTail)")
        let cgroupPath = report["cgroup"] as? String ?? "?"
        try expect(
            cgroupPath.hasPrefix("/memwarn-run-") && !KernelFiles.host.exists(pod.location.directory + cgroupPath),
            "the run's cgroup is below the container's root and removed: \(cgroupPath)")
        context.note("run as the entrypoint: its command OOM-killed at 32 MiB in \(cgroupPath) (exit 137), cgroup removed")
    }

    /// Runs `arguments` in the container (the pod's cgroup, new namespaces) to its end.
    private static func inContainer(_ context: ScenarioContext, _ pod: TestCgroup, _ arguments: [String]) async throws -> CommandRun {
        let child = try LineChild([context.products.scenarios, "--in-container"] + arguments, in: pod)
        defer { child.killIfRunning() }
        child.closeInput()
        let lines = try await child.remainingLines(within: .seconds(60))
        let status = try await child.exitStatus(within: .seconds(60))
        return CommandRun(status: status, lines: lines, errorTail: child.standardErrorTail)
    }
}
