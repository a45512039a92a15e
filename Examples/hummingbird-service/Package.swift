// swift-tools-version:6.2
// A Hummingbird 2 service that uses memwarn as a service developer would: from memwarn's README
// and public API, depending on the repository's root package by path.
import PackageDescription

let package = Package(
    name: "hummingbird-service",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "hummingbird-service", targets: ["HummingbirdService"]),
    ],
    dependencies: [
        .package(name: "memwarn", path: "../.."),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
    ],
    targets: [
        .executableTarget(
            name: "HummingbirdService",
            dependencies: [
                .product(name: "Memwarn", package: "memwarn"),
                .product(name: "MemwarnLifeCycle", package: "memwarn"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
    ]
)
