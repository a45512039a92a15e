// swift-tools-version:6.3
// The manifest is the architecture, bottom to top (each target uses only those above it here):
//   CLibcgroup      libcgroup alone (Debian's libcgroup-dev), as a system library
//   CLinuxCalls     the Linux calls Swift's Glibc module does not export: epoll, eventfd, inotify,
//                   prctl, accept4, SO_PEERCRED, pipe2, unshare, malloc_trim, futex, a fork-and-exec into a cgroup
//   MemwarnSystem   the system layer: owned descriptors, one syscall wrapper (EINTR, SystemError),
//                   the epoll EventLoop (registration ids, loop-thread checks), sockets, pipes,
//                   inotify, threads, the package's lock (a pthread mutex the thread sanitizer sees), a futex word,
//                   spawning into a cgroup, line streams, sizes
//   CgroupKit       the kernel side: discovery, file readers and strict parsers, libcgroup calls (public:
//                   only the values a reading carries)
//   MemwarnRelease  the release core: levels, tiers, the coordinator, the consumer protocol, reports,
//                   memory-warning responders, the one fan-out (Broadcaster)
//   MemwarnStores   the stores on that core: the discardable cache, purgeable data, media, shared
//                   resources (no libcgroup: a program that needs only a cache links this)
//   MemwarnMonitor  detection: readings, policy, growth, event sources, the pressure monitor and its
//                   release thread, admission, a node agent's leases
//   MemwarnControl  the control endpoint and client (memwarn status/trigger/agent speak to it)
//   Memwarn         the library services link: re-exports CgroupKit and the four above, and the DocC articles
//   MemwarnConfiguration  the policy from apple/swift-configuration's ConfigReader, and a running
//                   monitor that follows it (a product of its own: a service that does not use
//                   swift-configuration does not build it)
//   MemwarnLifeCycle  UIKit's life cycle for a service and its units: states, background tasks,
//                   will-terminate, and terminate-suspended through the release order
//   MemwarnAgent    the node agent: watches a parent cgroup (or the node) with the monitor's engine,
//                   finds the memwarn services under it, leases them the parent's pressure, and asks
//                   them to release, largest first, paced by what they free
//   MemwarnSoak     commands under constrained cgroups (memwarn run), the soak of the demo or of your own
//                   service with its load, its report, plot, floor and leak verdict
//   memwarn         the operator's command-line tool
//   memwarn-demo    a memory-hungry demo service using every part of the library (the soak's subject)
// Test support:
//   MemwarnTestKit  real test cgroups (v1, and made with mkdir for the v2 VM), memwarn-hog, children
//                   spoken to by lines and JSON lines, sibling products, a monitor's diagnostics: for tests,
//                   benchmarks, the VM
//   MemwarnTestTraits  Swift Testing tags and conditions: a run that cannot make cgroups skips with the reason
//   MemwarnTestFixtures  what the test targets share in process: synthetic hosts of plain files (v2, v1, a pod),
//                   a fake consumer and the cache fixtures, a scratch directory, the test logger and waits
//   memwarn-hog     a child process that holds as much memory as it is told
//   memwarn-release-probe  a child process holding caches, media and handles to release (tests)
//   memwarn-lifecycle-probe  a child process whose sessions are units (tests)
//   memwarn-growth-probe  a service written as the README teaches that keeps growing (tests, benchmark)
//   memwarn-v2-scenarios  the cgroup v2 scenarios, run as a static executable inside a VM (Scripts/v2-vm-test)
//   memwarn-fuzz    every parser under libFuzzer (Scripts/fuzz), or a replay of inputs (tests)
// A target of this package depends on the layers it uses, not on the umbrella Memwarn, so that
// Scripts/check-layers sees them; memwarn-demo and the probes import Memwarn as a service does (and
// MemwarnMonitor too, for the diagnostics they print, which are package).
// A test target a module, in the same order: MemwarnSystemTests, CgroupKitTests, MemwarnReleaseTests,
// MemwarnStoresTests, MemwarnMonitorTests, MemwarnControlTests, MemwarnConfigurationTests,
// MemwarnLifeCycleTests, MemwarnAgentTests (in process, on fixtures), and MemwarnCLITests (the
// executables, and the soak).
// Every Swift target gets strictSettings, in the loop at the end of the file.
// Linux only, so no `platforms:` (it sets minimum versions of Apple's systems, none of them Linux;
// the C targets include Linux's own headers, epoll and futex, so nothing here builds on macOS).
// The tools version, 6.3, is the oldest Swift that builds it (`weak let` needs it); 6.3.1 is the one tested.
import PackageDescription

let package = Package(
    name: "memwarn",
    products: [
        // The libraries in the order of the layers (above). CgroupKit is not one of its own: its
        // public part is the values a reading carries (limits, constraints, pressure stalls), which
        // Memwarn re-exports; how the files are found and read is the package's own.
        // The stores alone (the cache, purgeable data, media, shared resources) on the release
        // core: no monitor, no libcgroup.
        .library(name: "MemwarnStores", targets: ["MemwarnStores"]),
        // Memwarn and the five layers it re-exports, named: their API is the product's (and what
        // Scripts/api-check compares with the last release).
        .library(name: "Memwarn", targets: ["Memwarn", "CgroupKit", "MemwarnRelease", "MemwarnStores", "MemwarnMonitor", "MemwarnControl"]),
        // The policy from a swift-configuration ConfigReader, followed while the monitor runs.
        .library(name: "MemwarnConfiguration", targets: ["MemwarnConfiguration"]),
        // The life cycle, with the Memwarn module its clients import beside it (the target itself
        // depends on the layers it uses, not on the umbrella).
        .library(name: "MemwarnLifeCycle", targets: ["MemwarnLifeCycle", "Memwarn"]),
        .executable(name: "memwarn", targets: ["MemwarnCLI"]),
        .executable(name: "memwarn-demo", targets: ["MemwarnDemo"]),
        // Test support, labelled as such: test cgroups, the hog and line-speaking children, for
        // those who test against real cgroups (the benchmarks' package uses it).
        .library(name: "MemwarnTestKit", targets: ["MemwarnTestKit"]),
        // The hog, the probes, the v2 scenarios and the fuzzer are not products: a package that
        // depends on memwarn never sees them. SwiftPM makes a product of each executable target
        // of the root package, named as the target: here they build as usual
        // (`swift build --product memwarn-hog`).
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-collections", from: "1.6.0"),
        // Reloading: ReloadingFileProvider, for a policy changed while the service runs.
        .package(url: "https://github.com/apple/swift-configuration", from: "1.4.0", traits: [.defaults, "Reloading"]),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        // FilePath, for the tests' configuration files (swift-configuration's own dependency).
        .package(url: "https://github.com/apple/swift-system", from: "1.8.1"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
    ],
    targets: [
        .systemLibrary(
            name: "CLibcgroup",
            pkgConfig: "libcgroup",
            providers: [.apt(["libcgroup-dev"])]
        ),
        .target(
            name: "CLinuxCalls"
        ),
        .target(
            name: "MemwarnSystem",
            dependencies: ["CLinuxCalls"]
        ),
        .target(
            name: "CgroupKit",
            dependencies: ["CLibcgroup", "MemwarnSystem"]
        ),
        .target(
            name: "MemwarnRelease",
            dependencies: ["MemwarnSystem"]
        ),
        .target(
            name: "MemwarnStores",
            dependencies: [
                "MemwarnRelease",
                "MemwarnSystem",
                .product(name: "HeapModule", package: "swift-collections"),
            ]
        ),
        .target(
            name: "MemwarnMonitor",
            dependencies: [
                "CgroupKit",
                "MemwarnRelease",
                "MemwarnSystem",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .target(
            name: "MemwarnControl",
            dependencies: [
                "CgroupKit",
                "MemwarnMonitor",
                "MemwarnRelease",
                "MemwarnSystem",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .target(
            name: "Memwarn",
            dependencies: ["CgroupKit", "MemwarnControl", "MemwarnMonitor", "MemwarnRelease", "MemwarnStores"]
        ),
        .target(
            name: "MemwarnConfiguration",
            dependencies: [
                "MemwarnMonitor",
                .product(name: "Configuration", package: "swift-configuration"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .target(
            name: "MemwarnLifeCycle",
            dependencies: [
                "MemwarnMonitor",
                "MemwarnRelease",
                "MemwarnStores",
                "MemwarnSystem",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .target(
            name: "MemwarnAgent",
            dependencies: [
                "CgroupKit", "MemwarnControl", "MemwarnMonitor", "MemwarnRelease", "MemwarnSystem",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .target(
            name: "MemwarnSoak",
            dependencies: [
                "CgroupKit",
                "MemwarnControl",
                "MemwarnMonitor",
                "MemwarnRelease",
                "MemwarnSystem",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(
            name: "MemwarnCLI",
            dependencies: [
                "MemwarnAgent",
                "MemwarnControl",
                "MemwarnMonitor",
                "MemwarnRelease",
                "MemwarnSoak",
                "CgroupKit",
                "MemwarnSystem",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ]
        ),
        .executableTarget(
            name: "MemwarnDemo",
            dependencies: [
                "Memwarn",
                "MemwarnMonitor",  // its diagnostics (package), for its status lines
                "MemwarnSystem",
                "MemwarnLifeCycle",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .target(
            name: "MemwarnTestKit",
            dependencies: ["CgroupKit", "MemwarnMonitor", "MemwarnSystem"]
        ),
        .target(
            name: "MemwarnTestTraits",
            dependencies: ["MemwarnTestKit"]
        ),
        .target(
            name: "MemwarnTestFixtures",
            dependencies: [
                "CgroupKit",
                "MemwarnMonitor",
                "MemwarnRelease",
                "MemwarnStores",
                "MemwarnSystem",
                "MemwarnTestKit",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(
            name: "memwarn-hog",
            dependencies: ["MemwarnSystem"],
            path: "Sources/MemwarnHog"
        ),
        .executableTarget(
            name: "memwarn-release-probe",
            dependencies: ["Memwarn", "MemwarnMonitor", "MemwarnSystem", .product(name: "Logging", package: "swift-log")],
            path: "Sources/MemwarnReleaseProbe"
        ),
        .executableTarget(
            name: "memwarn-lifecycle-probe",
            dependencies: [
                "Memwarn",
                "MemwarnSystem",
                "MemwarnLifeCycle",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            path: "Sources/MemwarnLifeCycleProbe"
        ),
        .executableTarget(
            name: "memwarn-growth-probe",
            dependencies: [
                "Memwarn",
                "MemwarnMonitor",  // its diagnostics (package), for the armed line
                "MemwarnSystem",
                "CgroupKit",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            path: "Sources/MemwarnGrowthProbe"
        ),
        .executableTarget(
            name: "memwarn-v2-scenarios",
            dependencies: [
                "MemwarnMonitor",
                "MemwarnRelease",
                "MemwarnTestKit",
                "MemwarnSystem",
                "CgroupKit",
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Sources/MemwarnV2Scenarios"
        ),
        .executableTarget(
            name: "memwarn-fuzz",
            dependencies: ["CgroupKit", "MemwarnControl", "MemwarnMonitor", "MemwarnSoak", "MemwarnStores", "MemwarnSystem"],
            path: "Sources/MemwarnFuzz"
        ),
        .testTarget(
            name: "MemwarnSystemTests",
            dependencies: ["MemwarnSystem"]
        ),
        .testTarget(
            name: "CgroupKitTests",
            dependencies: ["CLibcgroup", "CgroupKit", "MemwarnTestKit", "MemwarnTestTraits"],
            resources: [.copy("Fixtures")]
        ),
        .testTarget(
            name: "MemwarnReleaseTests",
            dependencies: ["CgroupKit", "MemwarnMonitor", "MemwarnRelease", "MemwarnStores", "MemwarnTestFixtures"]
        ),
        .testTarget(
            name: "MemwarnStoresTests",
            dependencies: ["MemwarnRelease", "MemwarnStores", "MemwarnSystem", "MemwarnTestFixtures", "MemwarnTestKit"]
        ),
        .testTarget(
            name: "MemwarnMonitorTests",
            dependencies: [
                "CgroupKit",
                "MemwarnMonitor",
                "MemwarnRelease",
                "MemwarnStores",
                "MemwarnSystem",
                "MemwarnTestFixtures",
                "MemwarnTestKit",
                "MemwarnTestTraits",
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
            ]
        ),
        .testTarget(
            name: "MemwarnControlTests",
            dependencies: [
                "CgroupKit",
                "MemwarnControl",
                "MemwarnMonitor",
                "MemwarnRelease",
                "MemwarnStores",
                "MemwarnSystem",
                "MemwarnTestFixtures",
                "MemwarnTestKit",
                "MemwarnTestTraits",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "MemwarnConfigurationTests",
            dependencies: [
                "CgroupKit",
                "MemwarnConfiguration",
                "MemwarnMonitor",
                "MemwarnSystem",
                "MemwarnTestFixtures",
                "MemwarnTestKit",
                "MemwarnTestTraits",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "ServiceLifecycleTestKit", package: "swift-service-lifecycle"),
                .product(name: "Configuration", package: "swift-configuration"),
                .product(name: "SystemPackage", package: "swift-system"),
            ]
        ),
        .testTarget(
            name: "MemwarnLifeCycleTests",
            dependencies: [
                "CgroupKit",
                "Memwarn",
                "MemwarnRelease",
                "MemwarnLifeCycle",
                "MemwarnSystem",
                "MemwarnTestKit",
                "MemwarnTestTraits",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "MemwarnAgentTests",
            dependencies: [
                "CgroupKit",
                "MemwarnAgent",
                "MemwarnControl",
                "MemwarnMonitor",
                "MemwarnRelease",
                "MemwarnSystem",
                "MemwarnTestFixtures",
                "MemwarnTestKit",
            ]
        ),
        .testTarget(
            name: "MemwarnCLITests",
            dependencies: [
                "MemwarnTestKit",
                "MemwarnTestTraits",
                "CgroupKit",
                "MemwarnSoak",
                "MemwarnSystem",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
    ]
)

// The same settings on every Swift target, in one place (as apple/swift-configuration's manifest
// does): Swift 6, `any` written for existentials, imports internal unless marked otherwise.
// Not on the C targets: the system library CLibcgroup (a module map) and CLinuxCalls (C sources).
let strictSettings: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]
let cTargets: Set<String> = ["CLibcgroup", "CLinuxCalls"]

for target in package.targets where !cTargets.contains(target.name) {
    switch target.type {
    case .regular, .executable, .test:
        target.swiftSettings = (target.swiftSettings ?? []) + strictSettings
    default:
        break
    }
}
