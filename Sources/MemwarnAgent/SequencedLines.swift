/// Lines said in the order their places were taken, whenever each is ready: a place is reserved
/// when a round or an ask begins, its line delivered when it ends, and a line goes out only once
/// every line before it has. Confined to the agent's loop.
struct SequencedLines {
    let say: (AgentRecord) -> Void
    private var reserved = 0
    private var next = 0
    private var waiting: [Int: AgentRecord] = [:]

    init(say: @escaping (AgentRecord) -> Void) {
        self.say = say
    }

    /// Takes the next place.
    mutating func reserve() -> Int {
        defer { reserved += 1 }
        return reserved
    }

    /// Delivers the line of a place: said now if every earlier place's is out, else when they are.
    mutating func deliver(_ record: AgentRecord, at place: Int) {
        waiting[place] = record
        while let line = waiting.removeValue(forKey: next) {
            say(line)
            next += 1
        }
    }
}
