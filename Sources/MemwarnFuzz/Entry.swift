// memwarn-fuzz: every parser of memwarn under libFuzzer (Scripts/fuzz builds it with
// -sanitize=fuzzer and -DFUZZING, and picks the target with MEMWARN_FUZZ_TARGET; "list" lists
// them), or, in a
// normal build, a replay tool: `memwarn-fuzz <target> FILE...` runs files through a target
// (the regression test replays the fixtures of past findings this way); `memwarn-fuzz --list`.
import MemwarnSystem

#if canImport(Glibc)
import Glibc
#endif

/// A line on standard error.
func complain(_ message: String) {
    StandardStream.error.writeLine(message)
}

#if FUZZING
/// The target the fuzzer drives, chosen once from `MEMWARN_FUZZ_TARGET`.
private let fuzzed: FuzzTarget = {
    let name = getenv("MEMWARN_FUZZ_TARGET").map { String(cString: $0) } ?? ""
    if name == "list" {  // the names and seeds, for Scripts/fuzz; _exit: libFuzzer treats exit() as a finding
        let list = FuzzTarget.all.map { $0.name + "\t" + $0.seeds.joined(separator: " ") + "\n" }.joined()
        StandardStream.output.write(Array(list.utf8))
        _exit(0)
    }
    guard let target = FuzzTarget.named(name) else {
        complain("memwarn-fuzz: set MEMWARN_FUZZ_TARGET to one of: \(FuzzTarget.all.map(\.name).joined(separator: ", "))")
        exit(2)
    }
    return target
}()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    fuzzed.run(data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? [])
    return 0
}

/// libFuzzer's driver, for a program whose `main` is its own.
@_silgen_name("LLVMFuzzerRunDriver")
func runFuzzerDriver(
    _ argc: UnsafeMutablePointer<CInt>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
    _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
) -> CInt

/// SwiftPM links an executable's `main` to `<module>_main`: here that hands over to libFuzzer.
@_cdecl("memwarn_fuzz_main")
public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    var count = argc
    var arguments = argv
    return runFuzzerDriver(&count, &arguments) { data, size in fuzzOneInput(data, size) }
}
#else
@main
enum Replay {
    static func main() {
        let arguments = Array(CommandLine.arguments.dropFirst())
        if arguments == ["--list"] {
            for target in FuzzTarget.all { print(target.name + "\t" + target.seeds.joined(separator: " ")) }
            return
        }
        guard let name = arguments.first, let target = FuzzTarget.named(name) else {
            complain("usage: memwarn-fuzz --list | memwarn-fuzz <target> FILE...")
            exit(2)
        }
        for path in arguments.dropFirst() {
            guard let file = fopen(path, "rb") else {
                complain("memwarn-fuzz: cannot open \(path)")
                exit(1)
            }
            var bytes: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 65_536)
            while true {
                let count = fread(&buffer, 1, buffer.count, file)
                if count <= 0 { break }
                bytes += buffer[0..<count]
            }
            fclose(file)
            target.run(bytes)
            print("\(name) \(path): ok")
        }
    }
}
#endif
