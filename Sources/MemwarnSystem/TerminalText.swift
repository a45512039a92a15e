/// Text from elsewhere made safe to print on one line of a terminal.
package enum TerminalText {
    /// A name or message from elsewhere (a cgroup's directory name, a socket's path, a service's
    /// error text: anyone who may make a cgroup or a socket picks them) made safe for one line:
    /// every control character, newlines and tabs included, becomes `\xNN`, and a backslash `\\`,
    /// so no name can move the cursor, colour the terminal or forge a line.
    ///
    /// - Parameter text: the text.
    /// - Returns: the text with every control character escaped.
    package static func escaped(_ text: String) -> String {
        var escaped = ""
        for scalar in text.unicodeScalars {
            if scalar == "\\" {
                escaped += "\\\\"
            } else if scalar.value < 0x20 || (0x7f...0x9f).contains(scalar.value) {
                escaped += "\\x" + (scalar.value < 0x10 ? "0" : "") + String(scalar.value, radix: 16)
            } else {
                escaped.unicodeScalars.append(scalar)
            }
        }
        return escaped
    }
}
