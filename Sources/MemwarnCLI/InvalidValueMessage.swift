/// What is wrong with a value given for a size or a duration, in words: a negative number and
/// an option where the value belongs are named as such (the options take the next argument
/// whatever it is, so that `-5M` is not read as an option and reported as a missing value);
/// anything else is "not a size".
enum InvalidValueMessage {
    /// `"-5M" is negative: a size is 0 bytes or more`, `"--json" is an option, not a size`, or
    /// `"5Q" is not a size`.
    static func notASize(_ text: String) -> String { words(text, "a size", "a size is 0 bytes or more") }

    /// `"-5s" is negative: a duration is 0 or more`, `"--json" is an option, not a duration`, or
    /// `"soon" is not a duration`.
    static func notADuration(_ text: String) -> String { words(text, "a duration", "a duration is 0 or more") }

    private static func words(_ text: String, _ kind: String, _ range: String) -> String {
        let trimmed = text.drop { $0 == " " || $0 == "\t" }
        if trimmed.hasPrefix("--") || (trimmed.first == "-" && trimmed.dropFirst().first?.isLetter == true) {
            return "\"\(text)\" is an option, not \(kind)"
        }
        return trimmed.first == "-" ? "\"\(text)\" is negative: \(range)" : "\"\(text)\" is not \(kind)"
    }
}
