import Foundation
import MemwarnTestKit
import Testing

#if canImport(Glibc)
import Glibc
#endif

extension RunCommandTests {
    /// `memwarn run` and the control endpoint: the command's environment is passed as it is
    /// (the endpoint is the application's `ControlService`, not something `run` turns on), and a
    /// command killed before its service could remove its socket leaves none behind. Nested in
    /// the serialized `memwarn run` suite.
    @Suite(.serialized)
    struct RunControlTests {
        static let memwarn = ChildProcess.productsDirectory + "/memwarn"
        static let probe = ChildProcess.productsDirectory + "/memwarn-release-probe"

        /// The `MEMWARN_CONTROL=` lines `env` prints under `memwarn run`, run with `environment`.
        static func controlSetting(_ environment: [String: String]) async throws -> [String] {
            let base = ProcessInfo.processInfo.environment.filter { $0.key != "MEMWARN_CONTROL" }.merging(environment) { $1 }
            let run = try await ChildProcess.runOffThePool(
                [memwarn, "run", "--memory-max", "32M", "--", "/usr/bin/env"],
                environment: base.map { "\($0.key)=\($0.value)" })
            #expect(run.status == 0, "\(run.standardError)")
            return run.standardOutput.split(separator: "\n").map(String.init).filter { $0.hasPrefix("MEMWARN_CONTROL=") }
        }

        @Test func theCommandGetsItsEnvironmentAsItIsWithNoControlSettingAdded() async throws {
            #expect(try await Self.controlSetting([:]) == [], "run adds nothing")
            #expect(try await Self.controlSetting(["MEMWARN_CONTROL": "off"]) == ["MEMWARN_CONTROL=off"], "the operator's word is passed on")
        }

        @Test func aCommandKilledWithItsEndpointOpenLeavesNoSocketBehind() throws {
            let run = try JSONLineChild([Self.memwarn, "run", "--memory-max", "256M", "--", Self.probe])
            defer { _ = run.stop() }
            let watching = try run.send("watch")
            let socket = try #require(watching["socket"] as? String, "the probe serves an endpoint: \(watching)")
            let probePID = try #require((watching["pid"] as? Int).map(Int32.init))
            #expect(FileManager.default.fileExists(atPath: socket))
            kill(probePID, SIGKILL)  // started by us, through memwarn run: its monitor cannot remove the socket
            #expect(try run.child.waitForExit() == 137)
            #expect(!FileManager.default.fileExists(atPath: socket), "memwarn run removed \(socket) of its killed command")
        }
    }
}
