// libcgroup (Debian's libcgroup-dev), found through pkg-config: only libcgroup here; the Linux
// calls Glibc lacks are in CLinuxCalls.
#ifndef MEMWARN_CLIBCGROUP_SHIM_H
#define MEMWARN_CLIBCGROUP_SHIM_H
#ifdef __linux__
#include <libcgroup.h>
#endif
#endif
