extension FixedWidthInteger {
    /// `self + other`, or the bound of the type the sum would pass (`max` or `min`): a sum of
    /// numbers another process sent (the bytes a service says it freed) never traps.
    ///
    /// - Parameter other: the number to add.
    /// - Returns: the sum, held at the type's bounds.
    package func addingSaturating(_ other: Self) -> Self {
        let (sum, overflow) = addingReportingOverflow(other)
        guard overflow else { return sum }
        return other > 0 ? .max : .min
    }
}

extension Sequence where Element: FixedWidthInteger {
    /// The sum of the elements, each addition held at the type's bounds
    /// (`addingSaturating(_:)`): never a trap.
    ///
    /// - Returns: the sum; 0 for no elements.
    package func saturatingSum() -> Element {
        reduce(0) { $0.addingSaturating($1) }
    }
}
