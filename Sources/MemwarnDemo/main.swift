// memwarn-demo: a memory-hungry service that uses every part of memwarn as a real user would.
// `memwarn soak` runs it under a limited cgroup twice, with memwarn and without (--no-memwarn).
import Foundation
import MemwarnSystem

do throws(DispatchDescriptors.DescriptorShortage) {  // libdispatch's descriptors before they can run out
    try DispatchDescriptors.checkAvailable()
} catch {
    StandardStream.error.writeLine("memwarn-demo: \(error)")
    exit(1)
}
await DispatchDescriptors.reserve()
do {
    let options = try DemoOptions.parse(Array(CommandLine.arguments.dropFirst()))
    let service = try DemoService(options: options)
    try await service.run()
} catch let error as DemoOptions.UsageError {
    FileHandle.standardError.write(Data("memwarn-demo: \(error)\n".utf8))
    exit(2)
} catch {
    FileHandle.standardError.write(Data("memwarn-demo: \(error)\n".utf8))
    exit(1)
}
