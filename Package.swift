// swift-tools-version:6.2
// The manifest is the architecture, bottom to top:
//   CLibcgroup      the C side: libcgroup (Debian's libcgroup-dev) as a system library, plus the
//                   Linux calls Swift's Glibc module does not export (epoll, eventfd, inotify)
//   CgroupKit       the kernel side: discovery, file readers and parsers, libcgroup calls
//   Memwarn         the library services link: event sources, policy, the pressure monitor,
//                   the release order and its stores (caches, media, shared resources)
//   MemwarnLifeCycle  UIKit's life cycle for a service and its units: states, background tasks,
//                   will-terminate, and terminate-suspended through the release order
//   MemwarnTestKit  real test cgroups and memory-hungry child processes, for tests and benchmarks
//   MemwarnSoak     commands under constrained cgroups (memwarn run), the soak and its report and plot
//   memwarn         the operator's command-line tool
//   memwarn-demo    a memory-hungry demo service using every part of the library (the soak's subject)
//   memwarn-v2-scenarios  the cgroup v2 scenarios, run as a static executable inside a VM (Scripts/v2-vm-test)
//   memwarn-hog     a child process that holds as much memory as it is told (tests, benchmarks)
//   memwarn-release-probe  a child process holding caches, media and handles to release (tests)
//   memwarn-lifecycle-probe  a child process whose sessions are units: told of memory warnings, suspended, terminated,
//                   relaunched, and shut down by SIGTERM (tests)
//   memwarn-growth-probe  a service written as the README teaches that keeps growing (tests,
//                   the growth benchmark)
//   memwarn-fuzz    every parser under libFuzzer (Scripts/fuzz), or a replay of inputs (tests)
import PackageDescription

let strictSettings: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "memwarn",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "Memwarn", targets: ["Memwarn"]),
        .library(name: "MemwarnLifeCycle", targets: ["MemwarnLifeCycle"]),
        .library(name: "CgroupKit", targets: ["CgroupKit"]),
        .executable(name: "memwarn", targets: ["MemwarnCLI"]),
        .executable(name: "memwarn-demo", targets: ["MemwarnDemo"]),
        // The test kit, the hog, the probes, the v2 scenarios and the fuzzer are test support:
        // not products, so a package that depends on memwarn never sees them. SwiftPM makes a
        // product of each executable target of the root package, named as the target: in this
        // package they build as usual (`swift build --product memwarn-hog`).
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-collections", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
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
            name: "CgroupKit",
            dependencies: ["CLibcgroup"],
            swiftSettings: strictSettings
        ),
        .target(
            name: "Memwarn",
            dependencies: [
                "CgroupKit",
                "CLibcgroup",
                .product(name: "HeapModule", package: "swift-collections"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strictSettings
        ),
        .target(
            name: "MemwarnLifeCycle",
            dependencies: [
                "Memwarn",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strictSettings
        ),
        .target(
            name: "MemwarnTestKit",
            dependencies: ["CgroupKit"],
            swiftSettings: strictSettings
        ),
        .target(
            name: "MemwarnSoak",
            dependencies: [
                "Memwarn",
                "CgroupKit",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "memwarn-fuzz",
            dependencies: ["CgroupKit", "Memwarn", "MemwarnSoak"],
            path: "Sources/MemwarnFuzz",
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "MemwarnDemo",
            dependencies: [
                "Memwarn",
                "MemwarnLifeCycle",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "MemwarnCLI",
            dependencies: [
                "Memwarn",
                "MemwarnSoak",
                "CgroupKit",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "memwarn-v2-scenarios",
            dependencies: [
                "Memwarn",
                "MemwarnLifeCycle",
                "MemwarnSoak",
                "CgroupKit",
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Sources/MemwarnV2Scenarios",
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "memwarn-hog",
            dependencies: ["MemwarnSoak"],
            path: "Sources/MemwarnHog",
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "memwarn-release-probe",
            dependencies: ["Memwarn", .product(name: "Logging", package: "swift-log")],
            path: "Sources/MemwarnReleaseProbe",
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "memwarn-growth-probe",
            dependencies: [
                "Memwarn",
                "CgroupKit",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            path: "Sources/MemwarnGrowthProbe",
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "memwarn-lifecycle-probe",
            dependencies: [
                "Memwarn",
                "MemwarnLifeCycle",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            path: "Sources/MemwarnLifeCycleProbe",
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "CgroupKitTests",
            dependencies: ["CgroupKit"],
            resources: [.copy("Fixtures")],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "MemwarnTests",
            dependencies: [
                "Memwarn",
                "MemwarnTestKit",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "ServiceLifecycleTestKit", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "MemwarnLifeCycleTests",
            dependencies: [
                "Memwarn",
                "MemwarnLifeCycle",
                "MemwarnTestKit",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "ServiceLifecycleTestKit", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "MemwarnCLITests",
            dependencies: ["MemwarnTestKit", "CgroupKit", "MemwarnSoak"],
            swiftSettings: strictSettings
        ),
    ]
)
