// The library a service links: its layers, re-exported so that `import Memwarn` is all a
// service writes (CgroupKit for the values a reading carries: limits, constraints, pressure
// stalls). A program that needs less links less: `MemwarnStores` alone (the cache, purgeable
// data, media, shared resources) does not link libcgroup.
@_exported public import CgroupKit
@_exported public import MemwarnControl
@_exported public import MemwarnMonitor
@_exported public import MemwarnRelease
@_exported public import MemwarnStores
