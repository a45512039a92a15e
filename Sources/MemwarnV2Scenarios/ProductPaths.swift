import MemwarnSystem

/// Where the other products are: beside this executable (in the VM, all of them are in `/bin`).
struct ProductPaths: Sendable {
    /// The folder of this executable (`/proc/self/exe`).
    let directory: String

    init() {
        directory = ExecutablePath.productsDirectory
    }

    /// The `memwarn` command-line tool.
    var memwarn: String { directory + "/memwarn" }
    /// `memwarn-hog`: holds as much memory as it is told.
    var hog: String { directory + "/memwarn-hog" }
    /// This runner, for `--in-container`.
    var scenarios: String { directory + "/memwarn-v2-scenarios" }
    /// `memwarn-growth-probe`: the README's service, growing at a set rate.
    var growthProbe: String { directory + "/memwarn-growth-probe" }
    /// `memwarn-lifecycle-probe`: client sessions as units, for terminate-suspended.
    var lifeCycleProbe: String { directory + "/memwarn-lifecycle-probe" }
}
