// The stores register with the release core's coordinator and answer its requests: a program
// that depends on the MemwarnStores product alone names ReleaseCoordinator, MemoryPressureLevel
// and ReleaseTier with `import MemwarnStores`, as a service does with `import Memwarn`.
@_exported public import MemwarnRelease
