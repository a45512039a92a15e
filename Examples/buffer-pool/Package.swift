// swift-tools-version:6.2
// A render service with a buffer pool of its own, registered as a memwarn `MemoryConsumer`: the
// example of the article "Writing your own consumer", depending on memwarn by path as a user's
// package would depend on it by URL.
import PackageDescription

let package = Package(
    name: "buffer-pool",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "buffer-pool-service", targets: ["BufferPoolService"]),
    ],
    dependencies: [
        .package(name: "memwarn", path: "../.."),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
    ],
    targets: [
        .executableTarget(
            name: "BufferPoolService",
            dependencies: [
                .product(name: "Memwarn", package: "memwarn"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
    ]
)
