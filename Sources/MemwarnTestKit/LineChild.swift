package import MemwarnSystem

#if canImport(Glibc)
import Glibc
#endif

/// A child process the harness talks to by lines: commands to its standard input, its standard
/// output taken line by line with a time limit on every read (a hung child fails its test, not
/// the whole run), its standard error kept for the details of a failure.
///
/// With a cgroup, the child joins it between `fork` and `exec`, so every page the program
/// touches is charged there. Every call has a blocking form (for a test's own thread or a short
/// exchange) and an awaiting one (`within:`) that holds no thread while it waits.
public final class LineChild: Sendable {
    /// The child's pid.
    public let pid: Int32
    /// The program, for messages.
    public let program: String
    private let child: WaitedChild
    private let input: Locked<FileDescriptor?>
    private let output: LineStream
    private let errors: LineStream?

    /// How the child's standard error is handled.
    public enum StandardError: Sendable {
        /// Kept, for ``standardErrorTail`` and ``standardErrorText``.
        case captured
        /// This process's standard error, shared.
        case inherited
    }

    /// Starts `arguments` (the program's path first).
    ///
    /// - Parameters:
    ///   - cgroup: the cgroup to start it in, or `nil` for this process's own.
    ///   - environment: its environment as `NAME=value` entries; `nil` passes this process's.
    ///   - standardError: whether its standard error is captured or shared.
    /// - Throws: ``ChildProcessError`` when it cannot be started.
    public init(
        _ arguments: [String], in cgroup: TestCgroup? = nil, environment: [String]? = nil,
        standardError: StandardError = .captured
    ) throws(ChildProcessError) {
        program = arguments.first ?? ""
        do throws(SystemError) {
            let toChild = try PipeEnds()
            let fromChild = try PipeEnds()
            var spawn = ChildSpawn(arguments, environment: environment)
            spawn.closesInheritedDescriptors = true  // what a test gives it, not the harness's descriptors
            spawn.cgroupProcsFile = cgroup?.location.file("cgroup.procs")
            spawn.standardInput = toChild.readEnd.rawValue
            spawn.standardOutput = fromChild.writeEnd.rawValue
            if standardError == .captured {
                let errorPipe = try PipeEnds()
                spawn.standardError = errorPipe.writeEnd.rawValue
                child = try WaitedChild(spawn)
                errors = try LineStream(reading: errorPipe.keepingReadEnd(), name: "memwarn-child-err")
            } else {
                child = try WaitedChild(spawn)
                errors = nil
            }
            pid = child.pid
            input = Locked(toChild.keepingWriteEnd())
            output = try LineStream(reading: fromChild.keepingReadEnd(), name: "memwarn-child-out")
        } catch {
            throw ChildProcessError("\(program) could not be started: \(error)")
        }
    }

    deinit {
        closeInput()
        child.signal(SIGKILL)
    }

    // MARK: Input

    /// Sends one line (a newline is added) to its standard input.
    ///
    /// - Throws: ``ChildProcessError`` when its input is closed (it exited, or ``closeInput()``).
    public func send(_ line: String) throws(ChildProcessError) {
        let outcome = input.withLock { input -> Result<Void, SystemError>? in
            guard let descriptor = input.take() else { return nil }
            let result = Result { () throws(SystemError) in try descriptor.writeAll(Array((line + "\n").utf8)) }
            input = consume descriptor
            return result
        }
        switch outcome {
        case nil: throw ChildProcessError("\(program)'s input is closed")
        case .failure(let error): throw ChildProcessError("\(program) (pid \(pid)) is gone: \(error)")
        case .success: return
        }
    }

    /// Closes its standard input (the probes and the hog exit then). Safe to call twice.
    public func closeInput() {
        input.withLock { $0 = nil }
    }

    // MARK: Output

    /// The next line of its standard output, waiting at most `timeout` (a bound against a hung
    /// child, not a measurement).
    ///
    /// - Throws: ``ChildProcessError`` when none came in time, or it closed its output first.
    public func nextLine(timeout: Duration = .seconds(60)) throws(ChildProcessError) -> String {
        try line(output.nextLine(timeout: timeout), waited: timeout)
    }

    /// The next line of its standard output, awaited for at most `limit`.
    ///
    /// - Throws: ``ChildProcessError`` when none came in time, or it closed its output first.
    public func nextLine(within limit: Duration = .seconds(60)) async throws(ChildProcessError) -> String {
        try line(await output.nextLine(within: limit), waited: limit)
    }

    private func line(_ next: LineStream.Next, waited: Duration) throws(ChildProcessError) -> String {
        switch next {
        case .line(let line):
            return line
        case .ended:
            throw ChildProcessError("\(program) closed its output (exit \(child.exitIfEnded.map { "\($0.code)" } ?? "not yet")); stderr: \(standardErrorTail)")
        case .timedOut:
            throw ChildProcessError("no line from \(program) within \(waited) (output so far: \(output.lastLines(3))); stderr: \(standardErrorTail)")
        }
    }

    /// Every line of its standard output not taken yet, once it has closed it (awaited for at
    /// most `limit` in all).
    ///
    /// - Throws: ``ChildProcessError`` when it still writes after `limit`.
    public func remainingLines(within limit: Duration = .seconds(60)) async throws(ChildProcessError) -> [String] {
        let deadline = ContinuousClock.now + limit
        var lines: [String] = []
        while true {
            switch await output.nextLine(within: max(.zero, deadline - .now)) {
            case .line(let line): lines.append(line)
            case .ended: return lines
            case .timedOut: throw ChildProcessError("\(program) still wrote after \(limit)")
            }
        }
    }

    /// Everything it printed to standard output so far, taken or not.
    public var standardOutputText: String { output.text }

    /// The end of its standard error so far (empty when it is inherited).
    public var standardErrorTail: String { errors?.lastLines(5) ?? "" }

    /// All of its standard error so far (empty when it is inherited).
    public var standardErrorText: String { errors?.text ?? "" }

    /// Awaits the end of its standard output and error (at most `limit` each), taking what was
    /// not taken yet: its whole output stays in ``standardOutputText`` and ``standardErrorText``.
    public func outputEnded(within limit: Duration = .seconds(60)) async {
        while case .line = await output.nextLine(within: limit) {}
        if let errors { while case .line = await errors.nextLine(within: limit) {} }
    }

    /// Blocks until it has closed its standard output and error (it exited, and so did anything
    /// that shared them), for at most `timeout`.
    ///
    /// - Throws: ``ChildProcessError`` when one is still open after `timeout`.
    public func waitForOutputEnd(timeout: Duration = .seconds(60)) throws(ChildProcessError) {
        let deadline = ContinuousClock.now + timeout
        guard output.waitForEnd(timeout: timeout), errors?.waitForEnd(timeout: max(.zero, deadline - .now)) ?? true else {
            throw ChildProcessError("\(program) still wrote after \(timeout)")
        }
    }

    // MARK: Ending

    /// Sends a signal, unless it has been reaped.
    public func signal(_ number: Int32) {
        child.signal(number)
    }

    /// Blocks until it has ended, for at most `timeout`: its exit status, or 128 + the signal.
    ///
    /// - Throws: ``ChildProcessError`` when it still runs after `timeout` (it is killed then).
    @discardableResult
    public func waitForExit(timeout: Duration = .seconds(60)) throws(ChildProcessError) -> Int32 {
        guard let exit = child.waitForExit(timeout: timeout) else {
            child.signal(SIGKILL)
            throw ChildProcessError("\(program) still ran after \(timeout); killed it")
        }
        return exit.code
    }

    /// Awaits its end, for at most `limit`: its exit status, or 128 + the signal.
    ///
    /// - Throws: ``ChildProcessError`` when it still runs after `limit` (it is killed then).
    public func exitStatus(within limit: Duration = .seconds(60)) async throws(ChildProcessError) -> Int32 {
        let exit = await withTaskGroup(of: ProcessExit?.self) { group in
            group.addTask { await self.child.exit() }
            group.addTask {
                do {
                    try await Task.sleep(for: limit)  // the time limit, not a wait for the exit
                } catch {
                    return nil  // cancelled: it ended first
                }
                self.child.signal(SIGKILL)  // so that the other task's wait ends too
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
        guard let exit else {
            throw ChildProcessError("\(program) still ran after \(limit); killed it")
        }
        return exit.code
    }

    /// How it ended, if it has.
    package var exitIfEnded: ProcessExit? { child.exitIfEnded }

    /// Whether it has ended.
    public var hasEnded: Bool { child.exitIfEnded != nil }

    /// Kills it (SIGKILL) if it still runs.
    public func killIfRunning() {
        child.signal(SIGKILL)
    }
}
