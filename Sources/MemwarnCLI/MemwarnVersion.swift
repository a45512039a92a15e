/// memwarn's version, as `memwarn --version` prints it: the one place it is written (the
/// CHANGELOG's newest heading names the same).
enum MemwarnVersion {
    static let current = "0.2.0"
}
