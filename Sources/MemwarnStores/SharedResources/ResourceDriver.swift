/// How a ``ResourcePool`` opens and closes its resources: the caller's closures, synchronous
/// (run on the calling thread) or asynchronous (awaited, never blocking a thread).
enum ResourceDriver<Resource>: Sendable {
    case synchronous(open: @Sendable () throws -> Resource, close: @Sendable (Resource) throws -> Void)
    case asynchronous(open: @Sendable () async throws -> Resource, close: @Sendable (Resource) async throws -> Void)

    /// Opens a resource.
    func open() async throws -> Resource {
        switch self {
        case .synchronous(let open, _): try open()
        case .asynchronous(let open, _): try await open()
        }
    }

    /// Closes a resource, awaiting an asynchronous close.
    func close(_ resource: Resource) async throws {
        switch self {
        case .synchronous(_, let close): try close(resource)
        case .asynchronous(_, let close): try await close(resource)
        }
    }

    /// The synchronous close, `nil` for an asynchronous driver.
    var closeNow: (@Sendable (Resource) throws -> Void)? {
        if case .synchronous(_, let close) = self { return close }
        return nil
    }
}
