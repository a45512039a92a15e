import ArgumentParser
import MemwarnSystem

/// `memwarn`: see what the memory monitor sees.
@main
struct MemwarnCommand: AsyncParsableCommand {
    /// Checks that the descriptors libdispatch needs can be had and reserves them first
    /// (`DispatchDescriptors`: before descriptors can run out), then parses and runs. Too few
    /// descriptors: one line "Error: ..." and the subcommand's status for "could not be carried
    /// out" (``startFailureStatus(of:)``). Bad arguments, `--help` and `--version` are left to
    /// the parser, which needs no descriptors.
    static func main() async {
        if let command = try? parseAsRoot() {
            do throws(DispatchDescriptors.DescriptorShortage) {
                try DispatchDescriptors.checkAvailable()
            } catch {
                StandardStream.error.writeLine("Error: \(error)")
                Self.exit(withError: ExitCode(startFailureStatus(of: command)))
            }
            await DispatchDescriptors.reserve()
        }
        await main(nil)
    }

    /// What each subcommand's help lists for "memwarn could not start": `run` 125 (the command
    /// never started), `soak` 2, the others 1.
    static func startFailureStatus(of command: any ParsableCommand) -> Int32 {
        switch command {
        case is RunCommand: 125
        case is SoakCommand: 2
        default: 1
        }
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
    @Option(
        name: .long,
        help: ArgumentHelp(
            "The cgroup to read: a path as in /proc/PID/cgroup, or an absolute path under the cgroup mount. Default: this process's own.",
            valueName: "path"))
    var cgroup: String?

    @Option(
        name: .long, help: ArgumentHelp("A policy file (format of Config/memwarn.conf). Default: $MEMWARN_CONFIG, else the built-in policy.", valueName: "file")
    )
    var config: String?

    @Flag(name: .long, help: "Print JSON instead of text.")
    var json = false

    func validate() throws {
        if let cgroup, !cgroup.hasPrefix("/") {
            throw ValidationError("--cgroup takes an absolute path, such as /system.slice/app.service; got \"\(cgroup)\"")
        }
    }
}
