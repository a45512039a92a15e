#if canImport(Glibc)
import Glibc
#endif

/// Writes whole lines to standard output at once, unbuffered, so `memwarn watch` shows
/// each event as it happens even through a pipe.
enum Output {
    static func line(_ text: String) { write(text, to: 1) }

    /// A whole line to standard error (`memwarn run` keeps stdout for its command).
    static func errorLine(_ text: String) { write(text, to: 2) }

    /// Text from elsewhere (another process's reply) made safe for a terminal: control
    /// characters — escape sequences, carriage returns, C1 controls — become `?`; newlines
    /// and tabs stay.
    static func printable(_ text: String) -> String {
        String(String.UnicodeScalarView(text.unicodeScalars.map { scalar in
            let isControl = scalar.value < 0x20 || (0x7f...0x9f).contains(scalar.value)
            return isControl && scalar != "\n" && scalar != "\t" ? "?" : scalar
        }))
    }

    private static func write(_ text: String, to descriptor: Int32) {
        let bytes = Array((text + "\n").utf8)
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress, $0.count) }
            if written < 0 && errno == EINTR { continue }
            guard written > 0 else { return }
            offset += written
        }
    }
}
