extension ConstrainedRun {
    /// Why a run could not start.
    package struct StartError: Error, CustomStringConvertible, CustomDebugStringConvertible {
        /// The kind of failure.
        package struct Code: Sendable, Hashable, CustomStringConvertible {
            private enum Base: String, Sendable, Hashable { case noCommand, commandNotFound, couldNotStart, setupFailed }
            private let base: Base
            private init(_ base: Base) { self.base = base }

            /// No command was given.
            package static let noCommand = Code(.noCommand)
            /// The command is not found on `PATH`, or not executable.
            package static let commandNotFound = Code(.commandNotFound)
            /// memwarn could not start the command in its cgroup: its own failure, not the
            /// command's (out of file descriptors opening the cgroup's `cgroup.procs`, out of
            /// memory or processes to fork; the error says which). A command that cannot be
            /// executed ends with status 127 instead, as a shell's does.
            package static let couldNotStart = Code(.couldNotStart)
            /// What the run needs besides the command could not be prepared (the soak's data
            /// folder, output files, or its watch of the service).
            package static let setupFailed = Code(.setupFailed)

            package var description: String { base.rawValue }
        }

        /// The kind of failure.
        package var code: Code
        /// What went wrong, in words.
        package var description: String
        /// The source file that threw it (`#fileID`).
        package var file: String
        /// The line that threw it.
        package var line: Int

        /// An error.
        ///
        /// - Parameters:
        ///   - code: the kind of failure.
        ///   - description: what went wrong, in words.
        ///   - file: where it is thrown; the default is the caller's.
        ///   - line: where it is thrown; the default is the caller's.
        package init(_ code: Code, description: String, file: String = #fileID, line: Int = #line) {
            self.code = code
            self.description = description
            self.file = file
            self.line = line
        }

        /// The description, the code and where it was thrown.
        package var debugDescription: String { "\(description) [\(code), thrown at \(file):\(line)]" }
    }
}
