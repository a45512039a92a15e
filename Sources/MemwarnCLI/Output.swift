import MemwarnSystem

/// Writes whole lines to standard output at once, unbuffered, so `memwarn watch` shows
/// each event as it happens even through a pipe.
enum Output {
    static func line(_ text: String) { StandardStream.output.writeLine(text) }

    /// A whole line to standard error (`memwarn run` keeps stdout for its command).
    static func errorLine(_ text: String) { StandardStream.error.writeLine(text) }

    /// A name from elsewhere (a cgroup's directory name: anyone who may make a cgroup picks it)
    /// made safe for one cell of a table: every control character, newlines and tabs included,
    /// becomes `\xNN`, and a backslash `\\`, so no name can move the cursor, colour the
    /// terminal or forge a row.
    static func name(_ text: String) -> String { TerminalText.escaped(text) }

    /// Text from elsewhere (another process's reply) made safe for a terminal: control
    /// characters — escape sequences, carriage returns, C1 controls — become `?`; newlines
    /// and tabs stay.
    static func printable(_ text: String) -> String {
        String(
            String.UnicodeScalarView(
                text.unicodeScalars.map { scalar in
                    let isControl = scalar.value < 0x20 || (0x7f...0x9f).contains(scalar.value)
                    return isControl && scalar != "\n" && scalar != "\t" ? "?" : scalar
                }))
    }
}
