/// Whether this process holds a Linux capability, read from `/proc/self/status` (`CapEff`).
package enum Capabilities {
    /// `CAP_SYS_RESOURCE`: lets a PSI trigger use a window that is not a multiple of 2 s.
    package static let sysResource = 24

    /// Whether the effective capability set holds `capability`.
    ///
    /// - Parameters:
    ///   - capability: the capability's number, such as ``sysResource``.
    ///   - files: where `/proc` is read; the real host by default.
    /// - Returns: whether the capability is effective.
    /// - Throws: `CgroupError` when `/proc/self/status` cannot be read or has no `CapEff`.
    package static func effective(_ capability: Int, files: KernelFiles = .host) throws(CgroupError) -> Bool {
        let path = "/proc/self/status"
        for line in try files.read(path).split(separator: "\n") where line.hasPrefix("CapEff:") {
            guard let mask = UInt64(CgroupValues.trimmed(line.dropFirst("CapEff:".count)), radix: 16) else {
                throw CgroupError(.malformed, "CapEff is not a hexadecimal mask", path: files.path(path))
            }
            return mask & (1 << UInt64(capability)) != 0
        }
        throw CgroupError(.malformed, "no CapEff line", path: files.path(path))
    }
}
