// The library a service links: its four layers, re-exported so that `import Memwarn` is all a
// service writes. A program that needs less links less: `MemwarnStores` alone (the cache,
// purgeable data, media, shared resources) does not link libcgroup.
@_exported public import MemwarnControl
@_exported public import MemwarnMonitor
@_exported public import MemwarnRelease
@_exported public import MemwarnStores
