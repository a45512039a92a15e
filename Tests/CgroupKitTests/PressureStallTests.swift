import Testing

@testable import CgroupKit

@Suite("PressureStall")
struct PressureStallTests {
    let path = "/proc/pressure/memory"

    @Test("A cgroup's memory.pressure gives both lines with exact values")
    func cgroupPressureGivesBothLines() throws {
        let files = Fixture.files("v2-host")
        let file = "/sys/fs/cgroup/system.slice/app.service/memory.pressure"
        let pressure = try PressureStall.parse(files.read(file), path: files.path(file))
        #expect(pressure.some == PressureStall.Line(avg10: 1.53, avg60: 0.87, avg300: 0.22, total: 5_843_021))
        #expect(pressure.full == PressureStall.Line(avg10: 1.12, avg60: 0.61, avg300: 0.15, total: 4_123_857))
    }

    @Test("The system-wide file of an idle machine reads as all zeros")
    func idleSystemFileIsAllZeros() throws {
        let files = Fixture.files("container-ns")
        let pressure = try PressureStall.parse(files.read(path), path: files.path(path))
        let zero = PressureStall.Line(avg10: 0, avg60: 0, avg300: 0, total: 0)
        #expect(pressure == PressureStall(some: zero, full: zero))
    }

    @Test("A file with only a some line has no full line")
    func someOnlyHasNoFullLine() throws {
        let files = Fixture.files("hybrid-host")
        let file = "/sys/fs/cgroup/unified/system.slice/app.service/cpu.pressure"
        let pressure = try PressureStall.parse(files.read(file), path: files.path(file))
        #expect(pressure.some.total == 118_344)
        #expect(pressure.full == nil)
    }

    @Test("The line order does not matter")
    func lineOrderDoesNotMatter() throws {
        let text = "full avg10=0.50 avg60=0.25 avg300=0.10 total=200\nsome avg10=1.00 avg60=0.75 avg300=0.20 total=300\n"
        let pressure = try PressureStall.parse(text, path: path)
        #expect(pressure.some.total == 300)
        #expect(pressure.full?.avg10 == 0.5)
    }

    @Test("A full stall of 100 percent is accepted")
    func hundredPercentIsAccepted() throws {
        let pressure = try PressureStall.parse("some avg10=100.00 avg60=99.99 avg300=97.12 total=18446744073709551615\n", path: path)
        #expect(pressure.some.avg10 == 100)
        #expect(pressure.some.total == .max)
    }

    @Test(
        "A line truncated inside the total field is malformed and names the file",
        arguments: [
            "some avg10=0.00 avg60=0.00 avg300=0.00 total=\n",
            "some avg10=0.00 avg60=0.00 avg300=0.00 tot\n",
            "some avg10=0.00 avg60=0.00 avg300=0.00\n",
            "some avg10=0.00 avg60=0.",
            "some\n",
        ])
    func truncatedLineIsMalformed(text: String) {
        expectError(.malformed, naming: path) { () throws(CgroupError) in try PressureStall.parse(text, path: path) }
    }

    @Test("A truncated full line is malformed even after a good some line")
    func truncatedFullLineIsMalformed() {
        let text = "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\nfull avg10=0.00 avg6"
        let error = expectError(.malformed, naming: path) { () throws(CgroupError) in try PressureStall.parse(text, path: path) }
        #expect(error?.message.contains("\"avg6\" is not name=value") == true)
    }

    @Test("A file without a some line is malformed")
    func missingSomeLineIsMalformed() {
        let error = expectError(.malformed, naming: path) { () throws(CgroupError) in
            try PressureStall.parse("full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n", path: path)
        }
        #expect(error?.message.contains("no \"some\" line") == true)
    }

    @Test("An empty file is malformed")
    func emptyFileIsMalformed() {
        expectError(.malformed, naming: path) { () throws(CgroupError) in try PressureStall.parse("", path: path) }
    }

    @Test(
        "A percentage above 100 or below 0 is malformed",
        arguments: [
            "some avg10=100.01 avg60=0.00 avg300=0.00 total=0\n",
            "some avg10=0.00 avg60=-0.50 avg300=0.00 total=0\n",
            "some avg10=nan avg60=0.00 avg300=0.00 total=0\n",
        ])
    func percentageOutOfRangeIsMalformed(text: String) {
        expectError(.malformed, naming: path) { () throws(CgroupError) in try PressureStall.parse(text, path: path) }
    }

    @Test("A line of another kind is malformed")
    func unknownLineKindIsMalformed() {
        let error = expectError(.malformed, naming: path) { () throws(CgroupError) in
            try PressureStall.parse("some avg10=0.00 avg60=0.00 avg300=0.00 total=0\nhalf avg10=0.00\n", path: path)
        }
        #expect(error?.message.contains("half") == true)
    }
}
