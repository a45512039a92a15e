// swift-tools-version:6.2
// memwarn's benchmarks, a package of their own so the library's users never resolve or build them.
//
//   memwarn-bench latency   how long after memory crosses the warning mark each reader hears of it:
//                           the PressureMonitor on v1 events and on adaptive sampling, a 100 ms polling thread
//   memwarn-bench idle      CPU the monitor's thread uses while nothing happens, on each path and usage
//   memwarn-bench armed     from a service's exec to its monitor armed
//   memwarn-bench growth    who survives growth under a real limit, on each path
//   memwarn-bench agent     services sharing a parent's limit: the node agent beside each releasing on its own
//   memwarn-bench cache     set and get throughput of DiscardableCache beside NSCache and a locked Dictionary
//   memwarn-bench release   how long a ReleaseCoordinator takes to give back 1 GiB held by ten caches
//
// Run them with ./run (it builds the root package's memwarn-hog first); see README.md.
import PackageDescription

let strictSettings: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "memwarn-benchmarks",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "memwarn-bench", targets: ["memwarn-bench"]),
    ],
    dependencies: [
        .package(name: "memwarn", path: "../"),
        // The monitor takes a Logger; the benchmark hands it a no-op one. Same requirement as the root's.
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
    ],
    targets: [
        .executableTarget(
            name: "memwarn-bench",
            dependencies: [
                .product(name: "Memwarn", package: "memwarn"),
                .product(name: "MemwarnTestKit", package: "memwarn"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictSettings
        ),
    ]
)
