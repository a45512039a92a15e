import NIOCore

/// How much of a request the server reads ahead of its handler, per connection.
///
/// Hummingbird (through NIO) reads a connection's bytes while they are consumed — by the
/// handler, or, after the response, by Hummingbird's discard of a body the handler left unread —
/// and holds what it has read until then: up to 10 parts (`NIOAsyncChannel`'s high watermark)
/// and the reads of one wake-up (4), each part one read. That memory is no handler's, so
/// admission cannot see it coming. With NIO's default reads (up to 64 KiB) it is up to 896 KiB
/// a connection: 32 uploads refused at once held 15 to 19 MiB while their bodies were dropped,
/// more than the room between memwarn's critical mark and a 128 MiB limit (12.8 MiB).
/// ``ReadAheadLimit`` reads ``readBytes`` at a time instead (6 to 7 MiB measured for the same
/// 32, at the same speed), and a request's admission reserves up to ``bytes`` beside its body.
enum ReadAhead {
    /// One read of a connection (16 KiB).
    static let readBytes = 16 << 10
    /// What one connection may hold read ahead of its handler: 14 reads.
    static let bytes = (10 + 4) * readBytes
}

/// Sets a connection's reads to ``ReadAhead/readBytes`` each when it is set up (an HTTP/1
/// channel handler for `HTTP1Channel.Configuration.additionalChannelHandlers`).
final class ReadAheadLimit: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny

    func handlerAdded(context: ChannelHandlerContext) {
        try? context.channel.syncOptions?.setOption(
            ChannelOptions.recvAllocator, value: FixedSizeRecvByteBufferAllocator(capacity: ReadAhead.readBytes))
    }
}
