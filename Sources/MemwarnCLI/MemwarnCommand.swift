import ArgumentParser
import MemwarnSystem

/// `memwarn`: see what the memory monitor sees.
@main
struct MemwarnCommand: AsyncParsableCommand {
    /// Arms libdispatch's timers first (`DispatchTimers`: before descriptors can run out), then
    /// parses and runs.
    static func main() async {
        await DispatchTimers.prepare()
        await main(nil)
    }

    static let configuration = CommandConfiguration(
        commandName: "memwarn",
        abstract: "Memory warnings for Linux services, from cgroup and PSI signals.",
        discussion: """
            Examples:
              memwarn status                      # this process's memory cgroup
              memwarn status --json --cgroup /system.slice/app.service
              memwarn status --all --cgroup /     # every memory cgroup, one row each
              memwarn watch --json --cgroup /sys/fs/cgroup/memory/app
              memwarn run --memory-max 256M -- ./my-service
              memwarn soak --duration 60s --plot soak.svg
              memwarn trigger --pid 4242 --level critical   # release memory now
              memwarn agent --cgroup /kubepods.slice --json  # one coordinated release for a shared limit
              memwarn --version
            Each subcommand's --help lists its exit status; bad arguments exit 64 with one \
            line "Error: ...".
            """,
        version: MemwarnVersion.current,
        subcommands: [StatusCommand.self, WatchCommand.self, RunCommand.self, TriggerCommand.self, SoakCommand.self, AgentCommand.self])
}

/// Options shared by the subcommands.
struct TargetOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp(
        "The cgroup to read: a path as in /proc/PID/cgroup, or an absolute path under the cgroup mount. Default: this process's own.",
        valueName: "path"))
    var cgroup: String?

    @Option(name: .long, help: ArgumentHelp("A policy file (format of Config/memwarn.conf). Default: $MEMWARN_CONFIG, else the built-in policy.", valueName: "file"))
    var config: String?

    @Flag(name: .long, help: "Print JSON instead of text.")
    var json = false

    func validate() throws {
        if let cgroup, !cgroup.hasPrefix("/") {
            throw ValidationError("--cgroup takes an absolute path, such as /system.slice/app.service; got \"\(cgroup)\"")
        }
    }
}
