// The C side of memwarn, in one module so system headers are not claimed twice:
// libcgroup (Debian's libcgroup-dev), and the Linux calls Swift's Glibc module does not
// export (epoll, eventfd, inotify, prctl, malloc_trim). Linux only.
#ifndef MEMWARN_CLIBCGROUP_SHIM_H
#define MEMWARN_CLIBCGROUP_SHIM_H
#ifdef __linux__
// No _GNU_SOURCE here: it changes glibc's struct layouts (fd_set) against SwiftGlibc's.
#include <malloc.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <libcgroup.h>

/// Names the calling thread (prctl is variadic, so Swift cannot call it directly).
static inline int memwarn_set_thread_name(const char *name) {
    return prctl(PR_SET_NAME, (unsigned long)name, 0UL, 0UL, 0UL);
}

/// Asks the CPU to start loading the cache lines at and just before an address, for
/// writing. A prefetch never faults, so any address may be given.
static inline void memwarn_prefetch_for_write(const void *address) {
    __builtin_prefetch(address, 1, 3);
    __builtin_prefetch((const char *)address - 16, 1, 3);
}
#endif
#endif
