import Testing

@testable import CgroupKit

@Suite("CgroupValues")
struct CgroupValuesTests {
    let path = "/sys/fs/cgroup/app/memory.max"

    @Test(
        "Every spelling of unlimited gives no limit",
        arguments: [
            "max", "max\n", "-1", "-1\n", "9223372036854771712", "9223372036854771712\n",
            "9223372036854775807", "18446744073709551615",
        ])
    func unlimitedSpellingsGiveNoLimit(text: String) throws {
        #expect(try CgroupValues.limit(text, path: path) == nil)
    }

    @Test("A normal number is the limit in bytes")
    func normalNumberIsTheLimit() throws {
        #expect(try CgroupValues.limit("268435456\n", path: path) == 268_435_456)
    }

    @Test("The value one byte below v1's unlimited is still a limit")
    func valueBelowV1UnlimitedIsALimit() throws {
        #expect(try CgroupValues.limit("9223372036854771711", path: path) == 9_223_372_036_854_771_711)
    }

    @Test("A limit of zero is a limit, not unlimited")
    func zeroIsALimit() throws {
        #expect(try CgroupValues.limit("0\n", path: path) == 0)
    }

    @Test(
        "A limit that is not a number is malformed and names the file",
        arguments: [
            "", "\n", "12k", "max max", "-2", "unlimited", "18446744073709551616", "0x100",
        ])
    func garbageLimitIsMalformed(text: String) {
        expectError(.malformed, naming: path) { () throws(CgroupError) in try CgroupValues.limit(text, path: path) }
    }

    @Test("A single number tolerates surrounding whitespace and the trailing newline")
    func numberToleratesWhitespace() throws {
        #expect(try CgroupValues.number(" 312147968 \n", path: path) == 312_147_968)
    }

    @Test("An empty number file is malformed and says it is empty")
    func emptyNumberIsMalformed() {
        let error = expectError(.malformed, naming: path) { () throws(CgroupError) in try CgroupValues.number("", path: path) }
        #expect(error?.message.contains("empty") == true)
    }

    @Test("A negative usage is malformed")
    func negativeNumberIsMalformed() {
        let error = expectError(.malformed, naming: path) { () throws(CgroupError) in try CgroupValues.number("-4096\n", path: path) }
        #expect(error?.message.contains("\"-4096\"") == true)
    }

    @Test("A flat keyed file gives every key with its value")
    func flatKeyedGivesEveryKey() throws {
        let text = "low 0\nhigh 84\nmax 3\noom 1\noom_kill 1\noom_group_kill 0\n"
        let values = try CgroupValues.flatKeyed(text, path: path)
        #expect(values == ["low": 0, "high": 84, "max": 3, "oom": 1, "oom_kill": 1, "oom_group_kill": 0])
    }

    @Test("A flat keyed file skips blank lines")
    func flatKeyedSkipsBlankLines() throws {
        #expect(try CgroupValues.flatKeyed("\nunder_oom 0\n\n  \noom_kill 5\n", path: path) == ["under_oom": 0, "oom_kill": 5])
    }

    @Test("A line without a value is malformed and gives its line number")
    func lineWithoutValueIsMalformed() {
        let error = expectError(.malformed, naming: path) { () throws(CgroupError) in
            try CgroupValues.flatKeyed("anon 4096\nfile 8192\nkernel\nsock 0\n", path: path)
        }
        #expect(error?.message.contains("line 3") == true)
    }

    @Test("A line with three fields is malformed")
    func lineWithThreeFieldsIsMalformed() {
        expectError(.malformed, naming: path) { () throws(CgroupError) in
            try CgroupValues.flatKeyed("anon 4096 8192\n", path: path)
        }
    }

    @Test("A repeated key is malformed and names the key")
    func repeatedKeyIsMalformed() {
        let error = expectError(.malformed, naming: path) { () throws(CgroupError) in
            try CgroupValues.flatKeyed("anon 4096\nfile 8192\nanon 4096\n", path: path)
        }
        #expect(error?.message.contains("\"anon\"") == true)
        #expect(error?.message.contains("line 3") == true)
    }

    @Test("A value that is not an unsigned number is malformed")
    func nonNumericValueIsMalformed() {
        let error = expectError(.malformed, naming: path) { () throws(CgroupError) in
            try CgroupValues.flatKeyed("anon 4096\nfile -1\n", path: path)
        }
        #expect(error?.message.contains("line 2") == true)
    }

    @Test("A flat keyed file with no lines is malformed")
    func emptyFlatKeyedIsMalformed() {
        expectError(.malformed, naming: path) { () throws(CgroupError) in try CgroupValues.flatKeyed("\n", path: path) }
    }

    @Test("A long garbage value is cut short in the message")
    func longGarbageIsPreviewed() {
        let garbage = String(repeating: "x", count: 200)
        let error = expectError(.malformed, naming: path) { () throws(CgroupError) in try CgroupValues.number(garbage, path: path) }
        #expect(error?.message.contains(String(repeating: "x", count: 40) + "…") == true)
        #expect(error?.message.contains(String(repeating: "x", count: 41)) == false)
    }
}
