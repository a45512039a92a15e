/// Something that holds shared-resource handles and can close the idle ones: the hook a unit
/// calls when it goes to the background (``ResourcePool`` conforms).
package protocol IdleHandleCloser: AnyObject, Sendable {
    /// Closes every idle handle; handles in use stay open.
    ///
    /// - Returns: what was closed and what failed.
    @discardableResult
    func closeIdle() -> ResourceCloseResult
}

extension ResourcePool: IdleHandleCloser {}
