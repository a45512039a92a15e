/// A consumer the monitor's proactive trim may shrink before any limit is near: it keeps to a
/// ceiling the trim sets, and counts its refills, so the trim can tell when a smaller consumer
/// costs the service work.
///
/// Every `DiscardableCache` registers one for itself. The trim is off unless the policy turns it on (`trim_interval`);
/// the article "Trimming before a limit", in the `Memwarn` module's documentation, says what it
/// reads and what it never does.
///
/// Implementations are called from the monitor's release thread and must be thread-safe.
public protocol TrimmableConsumer: MemoryConsumer {
    /// How many values the consumer has had to make or fetch again because it did not hold
    /// them — for a cache, every set of a key it did not hold. It only grows. The trim compares
    /// its rate from one step to the next: a rate that rises after a step is a cost of the step.
    var refillCount: Int { get }

    /// The most bytes the consumer may hold while the trim keeps it small; `nil` for no ceiling
    /// of the trim's. Setting a ceiling below ``MemoryConsumer/footprintBytes`` gives the
    /// difference back at once, and the consumer keeps to it as it fills again; its own limits
    /// still hold. Only the trim sets it.
    var trimCeilingBytes: Int? { get set }
}
