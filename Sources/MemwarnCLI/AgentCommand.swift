import ArgumentParser
import CgroupKit
import Foundation
import Logging
import MemwarnAgent
import MemwarnControl
import MemwarnMonitor
import MemwarnSystem
import ServiceLifecycle

#if canImport(Glibc)
import Glibc
#endif

/// `memwarn agent`: one coordinated release for a shared limit.
struct AgentCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "agent",
        abstract: "Guard a parent cgroup's (or the node's) memory: ask the memwarn services under it to release, largest first.",
        discussion: """
            The agent finds the memwarn services under --cgroup (processes serving a control \
            endpoint whose /proc/PID/cgroup lies below it, known by the pid the kernel gives for \
            the socket the moment it is made, never by what they say), leases them the parent's \
            pressure (each service's own monitor then leaves that limit to the agent, and counts \
            it again within --lease if the agent stops), watches the parent with the monitor's own \
            engine (its marks, hysteresis and hold are the policy's: --config), and when the \
            parent's level asks for a release asks the services, the largest first by \
            kernel-measured usage, one at a time, reading the parent after each, until it is \
            under its recovery mark; at critical, those that can still give at warning first, \
            then at critical (terminating suspended units) in the same order. Only services that \
            say they have something to give are asked, each at most every 250 ms at warning and \
            every second at critical, less often while its asks free little; when no service can \
            relieve the parent it says so (unrelievable) and asks nobody until that changes. With --min-available the node's MemAvailable is \
            guarded too, as the kubelet's eviction threshold reads it (all services on the node are asked). \
            Cgroups under the parent with no memwarn service are listed, never touched. \
            In a container with its own cgroup namespace (a DaemonSet with hostPID), name the parent \
            under the host's cgroup tree mounted read-only: services outside the namespace \
            (/proc/PID/cgroup paths starting with /..) are placed exactly under that mount, by the \
            agent's own cgroup found there; one that cannot be placed so is reported, not guessed.
            Exit status: 0 when interrupted (SIGTERM, SIGINT: the leases end at once); 1 when the \
            parent cannot be read or has no limit of its own and no --min-available is given, or \
            the --metrics-file cannot be written; 64 for bad arguments.
            Example: memwarn agent --cgroup /system.slice --json --metrics-file /var/lib/node_exporter/memwarn.prom
            From a container: memwarn agent --cgroup /host/sys/fs/cgroup/kubepods.slice --control-dir '/host/run/memwarn/pods/*/memwarn' --min-available 750Mi --json
            """)

    @Option(
        name: .long,
        help: ArgumentHelp(
            "The parent cgroup whose limit its services share: a path as in /proc/PID/cgroup, or under a cgroup mount, such as the host's tree mounted read-only into the agent's container (/host/sys/fs/cgroup/kubepods.slice), seen from a private cgroup namespace.",
            valueName: "path"))
    var cgroup: String?

    @Option(
        name: .long, parsing: .unconditional,
        help: ArgumentHelp(
            "Guard the node: pressure as MemAvailable nears SIZE (the kubelet's memory.available eviction threshold, say 500M).", valueName: "size"))
    var minAvailable: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "A directory of control endpoints (repeatable; a pattern with * is matched afresh at each search, such as '/run/memwarn/pods/*/memwarn'). Default: this user's (root's: /run/memwarn), and for root every user's under /run/user and /tmp.",
            valueName: "dir"))
    var controlDir: [String] = []

    @Option(
        name: .long, parsing: .unconditional,
        help: ArgumentHelp("How long one service may take to answer before the agent goes on.", valueName: "duration"))
    var askTimeout = "2s"

    @Option(
        name: .long, parsing: .unconditional,
        help: ArgumentHelp(
            "The lease each service gets, renewed every third of it, at most every second (1s..60s): how soon a service counts the parent again if the agent dies.",
            valueName: "duration"))
    var lease = "5s"

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Write the agent's Prometheus metrics to this file after each change (node_exporter's textfile collector reads it).", valueName: "file"))
    var metricsFile: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "A policy file (format of Config/memwarn.conf): the marks applied to the parent. Default: $MEMWARN_CONFIG, else the built-in policy.",
            valueName: "file"))
    var config: String?

    @Flag(name: .long, help: "Print JSON lines instead of text.")
    var json = false

    func validate() throws {
        guard cgroup != nil || minAvailable != nil else { throw ValidationError("give --cgroup PATH, --min-available SIZE, or both") }
        if let cgroup, !cgroup.hasPrefix("/") { throw ValidationError("--cgroup takes an absolute path, such as /system.slice; got \"\(cgroup)\"") }
        if let minAvailable, ByteSize.parse(minAvailable) == nil {
            throw ValidationError("--min-available: \(InvalidValueMessage.notASize(minAvailable)) (a size such as 500M)")
        }
        guard let timeout = PressurePolicy.parseDuration(askTimeout), timeout >= .milliseconds(10), timeout <= .seconds(60) else {
            throw ValidationError("--ask-timeout takes a duration within 10ms...60s, such as 2s; got \"\(askTimeout)\"")
        }
        // The leases are renewed on a thread of their own, every third of the lease: an ask of any
        // length does not hold them up.
        guard let lease = PressurePolicy.parseDuration(lease), lease >= .seconds(1), lease <= .seconds(60) else {
            throw ValidationError("--lease takes a duration within 1s...60s, such as 5s; got \"\(self.lease)\"")
        }
    }

    func run() async throws {
        let environment = ProcessInfo.processInfo.environment
        let policy = try PressurePolicy.load(file: config, environment: environment)
        let parent = try cgroup.map { (path) throws(CgroupError) -> CgroupLocation in
            guard let memory = try CgroupDiscovery().layout(cgroupPath: path).memory else {
                throw CgroupError(.noMemoryController, "no memory controller is mounted", path: path)
            }
            return memory
        }
        var agentConfiguration = AgentConfiguration(
            parent: parent, minAvailableBytes: minAvailable.flatMap(ByteSize.parse),
            controlDirectories: controlDir.isEmpty ? ControlDirectory.everyUsersPaths : controlDir, policy: policy)
        agentConfiguration.askTimeout = PressurePolicy.parseDuration(askTimeout) ?? .seconds(2)
        agentConfiguration.lease = PressurePolicy.parseDuration(lease) ?? .seconds(5)
        for directory in agentConfiguration.controlDirectories where !directory.contains("*") {
            // One that does not exist yet is searched when it does; one that is something else is a mistake.
            if let type = FileType.at(directory, followingLinks: false), type != .directory {
                throw ValidationError("--control-dir \(directory) is not a directory (a symbolic link is not followed)")
            }
        }

        let json = self.json
        let agent = NodeAgent(configuration: agentConfiguration, metricsFile: metricsFile) { record in
            Output.line(json ? ((try? JSONLine.encode(record)) ?? #"{"event":"unencodable"}"#) : record.text)
        }
        if let metricsFile { try agent.checkMetricsFile(metricsFile) }
        // SIGTERM and SIGINT shut it down gracefully: every lease ends at once, then it exits 0.
        let group = ServiceGroup(
            configuration: .init(
                services: [agent], gracefulShutdownSignals: [.sigterm, .sigint],
                logger: Logger(label: "memwarn.agent", factory: { _ in SwiftLogNoOpLogHandler() })))
        try await group.run()
    }
}
