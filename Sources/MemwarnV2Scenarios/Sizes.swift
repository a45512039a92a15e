import MemwarnSystem

/// One mebibyte in bytes.
let mebibyte = 1 << 20

/// The `memory.max` of the scenarios that step a hog through the marks (as the v1 tests do).
let hogCgroupLimit = 64 * mebibyte

/// A size as the details of a scenario print it (`48.0 MiB`).
func describe(bytes: some BinaryInteger) -> String {
    ByteSize.describe(UInt64(clamping: bytes))
}
