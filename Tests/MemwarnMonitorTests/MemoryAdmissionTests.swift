import CgroupKit
import MemwarnRelease
import MemwarnTestFixtures
import MemwarnTestKit
import MemwarnTestTraits
import Testing

@testable import MemwarnMonitor

/// Work admitted by the memory it declares, against what is left below the
/// critical mark, on a real cgroup whose usage a real process sets.
@Suite(.serialized, .tags(.root, .cgroupV1), .needsRealCgroups)
struct MemoryAdmissionTests {
    static let limit: UInt64 = 64 << 20

    @Test func reservationsFitTheHeadroomBelowTheCriticalMarkAndAreGivenBack() async throws {
        try await withTestCgroup(limit: Self.limit) { cgroup in
            let hog = try MemoryHog(in: cgroup)
            defer { hog.terminate() }
            var configuration = MonitorConfiguration(cgroupPath: cgroup.location.directory, environment: [:])
            configuration.watchesPressureStall = false
            let monitor = PressureMonitor(configuration: configuration, logger: testLogger)
            let admission = MemoryAdmission(monitor: monitor, freshness: .zero)  // every decision reads usage
            try await withRunningMonitor(monitor) { iterator in
                _ = try await next(&iterator)
                try await hog.hold(0.5, of: Int(Self.limit))
                let mark = Int(Double(Self.limit) * configuration.policy.criticalRatio)
                let room = try #require(admission.headroomBytes)
                let usage = Int(try cgroup.usage())
                #expect(abs(room - (mark - usage)) < 1 << 20, "the critical mark less usage read now: \(room) against \(mark - usage)")

                let first = try #require(admission.reserve(bytes: room / 2), "half the headroom fits")
                #expect(admission.reservedBytes == room / 2)
                #expect(admission.reserve(bytes: room / 2 + (2 << 20)) == nil, "the rest does not fit beside the first")
                first.release()
                first.release()  // once only
                #expect(admission.reservedBytes == 0)
                #expect(admission.reserve(bytes: room / 2 + (2 << 20)) != nil, "it fits once the first is given back (and released when dropped)")
                #expect(admission.reservedBytes == 0)

                // Usage read afresh: what the process took since the last reading counts at once.
                try await hog.hold(0.8, of: Int(Self.limit))
                let after = try #require(admission.headroomBytes)
                #expect(after < room - (16 << 20), "20 % of 64 MiB more in use: \(room) → \(after)")
                #expect(admission.reserve(bytes: room / 2) == nil)
                #expect(admission.refusedCount == 2)
            }
        }
    }

    /// A monitor turned off has no reading: everything is admitted, and counted — even sizes as
    /// large as `Int.max` ("unknown"), which count as the largest reservation and cannot overflow
    /// the sum.
    @Test func aMonitorWithoutAReadingAdmitsEverythingWithoutOverflowing() throws {
        var configuration = MonitorConfiguration(environment: [MonitorConfiguration.disableVariable: "1"])
        configuration.watchesPressureStall = false
        let monitor = PressureMonitor(configuration: configuration, logger: testLogger)
        let admission = MemoryAdmission(monitor: monitor)
        #expect(admission.headroomBytes == nil)
        let reservations = (0..<3).compactMap { _ in admission.reserve(bytes: .max) }
        #expect(reservations.count == 3)
        #expect(admission.reservedBytes == 3 * MemoryAdmission.largestReservation)
        withExtendedLifetime(reservations) {}
    }
}
