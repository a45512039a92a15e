import CgroupKit
import Foundation
import MemwarnTestKit
import MemwarnTestTraits
import Testing

/// `memwarn status --pid PID` reads the process's memory cgroup and asks its
/// control endpoint which ancestors a node agent coordinates for it (no CLI showed a lease).
@Suite(.serialized, .tags(.root, .cgroupV1), .needsRealCgroups)
struct StatusPidTests {
    typealias Runtime = TriggerCommandTests.Runtime

    func status(_ arguments: [String], _ runtime: Runtime) throws -> ChildProcess.Finished {
        try ChildProcess.run([TriggerCommandTests.memwarn, "status", "--growth-sample", "0s"] + arguments, environment: runtime.environment)
    }

    @Test func aServicesLeaseIsShownInTextAndJSON() async throws {
        let runtime = Runtime()
        defer { runtime.remove() }
        try await withTestCgroup(limit: TriggerCommandTests.limit) { cgroup in
            let probe = try runtime.servingProbe(in: cgroup, load: false)
            defer { probe.stop() }
            let parent = try #require(cgroup.location.parent?.path)
            let before = try status(["--pid", "\(probe.pid)", "--json"], runtime)
            #expect(before.status == 0, "\(before.standardError)")
            let unleased = try TriggerCommandTests.object(before.standardOutput)
            #expect(unleased["cgroupPath"] as? String == cgroup.location.path, "the process's own cgroup: \(unleased)")
            #expect(unleased["coordinatedCgroups"] as? [String] == [])

            // A lease, granted as an agent asks for one: to this process, by its credentials.
            let agent = try RawControlClient(runtime.socket(of: probe.pid))
            agent.send(#"{"request":"coordinate","cgroup":"\#(parent)","leaseMilliseconds":60000}"# + "\n")
            #expect(agent.readToEnd().contains(#""ok":true"#))

            let json = try status(["--pid", "\(probe.pid)", "--json"], runtime)
            #expect(json.status == 0, "\(json.standardError)")
            #expect(try TriggerCommandTests.object(json.standardOutput)["coordinatedCgroups"] as? [String] == [parent], "\(json.standardOutput)")
            let text = try status(["--pid", "\(probe.pid)"], runtime)
            #expect(text.status == 0, "\(text.standardError)")
            #expect(text.standardOutput.contains("coordinated by the node agent: \(parent) (lease)"), "\(text.standardOutput)")
        }
    }

    /// What the service's own monitor listens to, as its endpoint says: systemd's watch (a FIFO,
    /// as a service manager may name one) among its sources, which `status` arming its own
    /// monitor here would never show (this process's environment names none).
    @Test func aServicesMonitorSourcesAreShownWithSystemdsWatch() async throws {
        let runtime = Runtime()
        defer { runtime.remove() }
        let fifo = runtime.directory + "/pressure.fifo"
        #expect(mkfifo(fifo, 0o600) == 0)
        try await withTestCgroup(limit: TriggerCommandTests.limit) { cgroup in
            let probe = try JSONLineChild(
                [TriggerCommandTests.probe], in: cgroup, environment: runtime.environment + ["MEMORY_PRESSURE_WATCH=\(fifo)"])
            defer { probe.stop() }
            #expect(try probe.send("watch")["watching"] as? String == "normal")
            let json = try status(["--pid", "\(probe.pid)", "--json"], runtime)
            #expect(json.status == 0, "\(json.standardError)")
            let report = try TriggerCommandTests.object(json.standardOutput)
            let sources = try #require(report["processMonitorSources"] as? [String], "\(json.standardOutput)")
            #expect(sources.contains("systemd \(fifo)"), "\(sources)")
            let own = try #require((report["monitor"] as? [String: Any])?["sources"] as? [String], "\(json.standardOutput)")
            #expect(!own.contains { $0.hasPrefix("systemd") }, "the monitor status arms has its own environment: \(own)")
            let text = try status(["--pid", "\(probe.pid)"], runtime)
            #expect(text.standardOutput.contains("process   its monitor: systemd \(fifo)"), "\(text.standardOutput)")
            // The summary form (a node agent's, at every renewal) leaves the sources out.
            let agent = try RawControlClient(runtime.socket(of: probe.pid))
            agent.send(#"{"request":"status","summary":true}"# + "\n")
            let summary = agent.readToEnd()
            #expect(summary.contains(#""monitorSources":[]"#), "\(summary)")
        }
    }

    @Test func aProcessWithoutAnEndpointIsStillReadAndSaysSo() async throws {
        let runtime = Runtime()
        defer { runtime.remove() }
        try await withTestCgroup(limit: TriggerCommandTests.limit) { cgroup in
            let hog = try MemoryHog()
            defer { hog.terminate() }
            try cgroup.add(pid: hog.pid)
            let result = try status(["--pid", "\(hog.pid)", "--json"], runtime)
            #expect(result.status == 0, "\(result.standardError)")
            let report = try TriggerCommandTests.object(result.standardOutput)
            #expect(report["cgroupPath"] as? String == cgroup.location.path && report["coordinatedCgroups"] as? [String] == [])
            #expect(report["processMonitorSources"] is NSNull, "no endpoint, no sources: \(report)")
            let notes = try #require(report["notes"] as? [String])
            #expect(notes.contains { $0.contains("process \(hog.pid) has no control endpoint") }, "\(notes)")
        }
    }

    @Test(arguments: [(["--pid", "0"], "--pid takes a positive process ID"), (["--pid", "1", "--cgroup", "/"], "give either --pid or --cgroup")])
    func badPidArgumentsExit64(arguments: [String], message: String) throws {
        let result = try ChildProcess.run([TriggerCommandTests.memwarn, "status"] + arguments)
        #expect(result.status == 64, "\(result.standardError)")
        #expect(result.standardError.contains(message), "\(result.standardError)")
    }
}
