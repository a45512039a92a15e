// The C side of memwarn, in one module so system headers are not claimed twice:
// libcgroup (Debian's libcgroup-dev), and the Linux calls Swift's Glibc module does not
// export (epoll, eventfd, inotify, thread names, malloc_trim). Linux only.
#ifndef MEMWARN_CLIBCGROUP_SHIM_H
#define MEMWARN_CLIBCGROUP_SHIM_H
#ifdef __linux__
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <malloc.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <libcgroup.h>
#endif
#endif
