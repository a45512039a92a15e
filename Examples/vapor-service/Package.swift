// swift-tools-version:6.2
// A Vapor 4 service over PostgreSQL that uses memwarn as a service developer would: from
// memwarn's README and public API, depending on the repository's root package by path. A
// package of its own, so that memwarn's users never build Vapor: copy it, and depend on memwarn
// by URL instead of by path.
import PackageDescription

let package = Package(
    name: "vapor-service",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "vapor-service", targets: ["VaporService"])
    ],
    dependencies: [
        .package(name: "memwarn", path: "../.."),
        .package(url: "https://github.com/vapor/vapor", from: "4.122.3"),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        .package(url: "https://github.com/apple/swift-configuration", from: "1.4.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
    ],
    targets: [
        .executableTarget(
            name: "VaporService",
            dependencies: [
                .product(name: "Memwarn", package: "memwarn"),
                .product(name: "MemwarnConfiguration", package: "memwarn"),
                .product(name: "Vapor", package: "vapor"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Configuration", package: "swift-configuration"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: [.swiftLanguageMode(.v6)]
        )
    ]
)
