#if canImport(Glibc)
import Glibc
#endif

/// Where the other products are: beside this executable (in the VM, all of them are in `/bin`).
struct ProductPaths: Sendable {
    /// The folder of `/proc/self/exe`.
    let directory: String

    init() {
        var buffer = [CChar](repeating: 0, count: 4096)
        let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        let executable = count > 0 ? String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self) : "./memwarn-v2-scenarios"
        directory = String(executable[..<(executable.lastIndex(of: "/") ?? executable.startIndex)])
    }

    /// The `memwarn` command-line tool.
    var memwarn: String { directory + "/memwarn" }
    /// `memwarn-hog`: holds as much memory as it is told.
    var hog: String { directory + "/memwarn-hog" }
    /// This runner, for `--in-container`.
    var scenarios: String { directory + "/memwarn-v2-scenarios" }
    /// `memwarn-lifecycle-probe`: client sessions as units, for terminate-suspended.
    var lifeCycleProbe: String { directory + "/memwarn-lifecycle-probe" }
}
