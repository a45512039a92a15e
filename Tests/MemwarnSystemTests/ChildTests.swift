import MemwarnSystem
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Children spawned from a waiting thread, and the lines they print.
@Suite struct ChildTests {
    /// `script` run by `/bin/sh`, its output in a line stream.
    static func shell(_ script: String) throws -> (child: WaitedChild, lines: LineStream) {
        let output = try PipeEnds()
        var spawn = ChildSpawn(["/bin/sh", "-c", script])
        spawn.standardOutput = output.writeEnd.rawValue
        let child = try WaitedChild(spawn)
        return (child, try LineStream(reading: output.keepingReadEnd()))
    }

    @Test func aChildsExitAndItsLinesAreSeenWholeWhateverTheirChunks() async throws {
        let (child, lines) = try Self.shell("printf 'one\\ntw'; sleep 0.1; printf 'o\\nthree'; exit 3")
        #expect(lines.nextLine(timeout: .seconds(10)) == .line("one"))
        #expect(await lines.nextLine(within: .seconds(10)) == .line("two"))
        #expect(lines.nextLine(timeout: .seconds(10)) == .line("three"), "a last line without its newline")
        #expect(lines.nextLine(timeout: .seconds(10)) == .ended)
        #expect(await child.exit() == ProcessExit(status: 3))
        #expect(lines.text == "one\ntwo\nthree")
    }

    @Test func waitingForALineOrAnExitEndsAtItsTimeLimit() async throws {
        let (child, lines) = try Self.shell("exec sleep 30")
        #expect(lines.nextLine(timeout: .milliseconds(50)) == .timedOut)
        #expect(await lines.nextLine(within: .milliseconds(50)) == .timedOut)
        #expect(child.waitForExit(timeout: .milliseconds(50)) == nil)
        child.signal(SIGKILL)  // the child we started
        #expect(child.waitForExit(timeout: .seconds(10)) == ProcessExit(signal: SIGKILL))
        #expect(lines.nextLine(timeout: .seconds(10)) == .ended)
        child.signal(SIGKILL)  // reaped: nothing is sent to a pid that may be another's now
    }

    @Test func aProgramThatCannotRunExits127AndAMissingCgroupIsAnError() throws {
        let missing = try WaitedChild(ChildSpawn(["/no/such/program"]))
        #expect(missing.waitForExit(timeout: .seconds(10)) == ProcessExit(status: 127))
        var spawn = ChildSpawn(["/bin/true"])
        spawn.cgroupProcsFile = "/no/such/cgroup/cgroup.procs"
        let error = #expect(throws: SystemError.self) { _ = try WaitedChild(spawn) }
        #expect(error?.call == "open" && error?.errno == ENOENT)
    }

    @Test func theEnvironmentAndArgumentsAreTheChildsAsGiven() throws {
        let output = try PipeEnds()
        var spawn = ChildSpawn(["/bin/sh", "-c", "echo \"$0 $MEMWARN_TEST_VALUE\"", "zero"], environment: ["MEMWARN_TEST_VALUE=given"])
        spawn.standardOutput = output.writeEnd.rawValue
        let child = try WaitedChild(spawn)
        let lines = try LineStream(reading: output.keepingReadEnd())
        #expect(lines.nextLine(timeout: .seconds(10)) == .line("zero given"))
        #expect(child.waitForExit(timeout: .seconds(10)) == ProcessExit(status: 0))
    }
}
