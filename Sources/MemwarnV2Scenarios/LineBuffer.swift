import Foundation
import Memwarn

/// The lines read from one pipe by a thread of its own, for ``LineChild``.
final class LineBuffer: Sendable {
    /// What ``takeLine()`` found.
    enum Taken {
        /// The oldest line not taken yet.
        case line(String)
        /// The writer closed the pipe and every line was taken.
        case ended
        /// No whole line yet.
        case none
    }

    private struct State {
        var partial: [UInt8] = []
        var lines: [String] = []
        var all: [String] = []
        var ended = false
    }

    private let state = Locked(State())

    /// Starts reading `handle` on a thread until end of file.
    func read(from handle: FileHandle) {
        Thread.detachNewThread { [self] in
            while true {
                let data = handle.availableData
                if data.isEmpty { break }
                append(data)
            }
            try? handle.close()
            state.withLock { state in
                if !state.partial.isEmpty {
                    let line = String(decoding: state.partial, as: UTF8.self)
                    state.lines.append(line)
                    state.all.append(line)
                    state.partial = []
                }
                state.ended = true
            }
        }
    }

    private func append(_ data: Data) {
        state.withLock { state in
            for byte in data {
                if byte == UInt8(ascii: "\n") {
                    let line = String(decoding: state.partial, as: UTF8.self)
                    state.lines.append(line)
                    state.all.append(line)
                    state.partial = []
                } else {
                    state.partial.append(byte)
                }
            }
        }
    }

    /// The oldest line not taken yet, or whether the pipe has ended.
    func takeLine() -> Taken {
        state.withLock { state in
            if !state.lines.isEmpty { return .line(state.lines.removeFirst()) }
            return state.ended ? .ended : .none
        }
    }

    /// Whether the writer closed the pipe and every line was taken.
    var hasEnded: Bool {
        state.withLock { $0.ended && $0.lines.isEmpty }
    }

    /// The last `count` lines read (taken or not), joined, for details and failures.
    func lastLines(_ count: Int) -> String {
        state.withLock { $0.all.suffix(count).joined(separator: " | ") }
    }
}
