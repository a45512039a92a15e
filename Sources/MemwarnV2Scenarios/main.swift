// memwarn-v2-scenarios: the cgroup v2 scenarios, run as PID 1's child inside a VM by
// Scripts/v2-vm-test (on real cgroup v2 memory; the host binds memory to cgroup v1).
//
//   memwarn-v2-scenarios [--only NAME[,NAME...]] [--repeat N] [--list]
//   memwarn-v2-scenarios --in-container PROGRAM [ARGS...]   (see ContainerEntry)
//
// --repeat runs the selection N times (to look for flaky timing).
// One line per scenario, PASS or FAIL with details; the exit status is the number of failed
// scenarios (the VM's init turns it into the verdict line). The scenarios make and remove
// cgroups below /sys/fs/cgroup, so the runner refuses to run anywhere but in the VM (whose
// init sets MEMWARN_V2_VM=1).
import Logging

#if canImport(Glibc)
import Glibc
#endif

let arguments = Array(CommandLine.arguments.dropFirst())
if arguments.first == "--in-container" { ContainerEntry.run(Array(arguments.dropFirst())) }
if arguments == ["--list"] {
    for scenario in ScenarioCatalog.all { print(scenario.name) }
    exit(0)
}
guard getenv("MEMWARN_V2_VM").map({ String(cString: $0) }) == "1" else {
    print("memwarn-v2-scenarios: runs only inside the v2 VM (Scripts/v2-vm-test), where it may make cgroups at the root")
    exit(100)
}
var selected = ScenarioCatalog.all
var repeats = 1
var rest = arguments[...]
while let option = rest.popFirst() {
    switch (option, rest.popFirst()) {
    case ("--only", let list?):
        let names = Set(list.split(separator: ",").map(String.init))
        let unknown = names.subtracting(ScenarioCatalog.all.map(\.name))
        guard unknown.isEmpty else {
            print("memwarn-v2-scenarios: unknown scenario(s) \(unknown.sorted().joined(separator: ", ")); --list names them")
            exit(100)
        }
        selected = ScenarioCatalog.all.filter { names.contains($0.name) }
    case ("--repeat", let count?) where Int(count).map({ $0 > 0 }) == true:
        repeats = Int(count) ?? 1
    default:
        print("usage: memwarn-v2-scenarios [--only NAME[,NAME...]] [--repeat N] [--list]")
        exit(100)
    }
}

var logger = Logger(label: "memwarn-v2-scenarios")
logger.logLevel = .error
let failed = await ScenarioRunner.run(Array(repeating: selected, count: repeats).flatMap { $0 }, products: ProductPaths(), logger: logger)
exit(Int32(min(failed, 99)))
