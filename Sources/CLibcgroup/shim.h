// The C side of memwarn, in one module so system headers are not claimed twice:
// libcgroup (Debian's libcgroup-dev), and the Linux calls Swift's Glibc module does not
// export (epoll, eventfd, inotify, prctl, malloc_trim, accept4, SO_PEERCRED). Linux only.
#ifndef MEMWARN_CLIBCGROUP_SHIM_H
#define MEMWARN_CLIBCGROUP_SHIM_H
#ifdef __linux__
// No _GNU_SOURCE here: it changes glibc's struct layouts (fd_set) against SwiftGlibc's.
#include <malloc.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <libcgroup.h>
#include <errno.h>
#include <signal.h>
#include <unistd.h>

/// Names the calling thread (prctl is variadic, so Swift cannot call it directly).
static inline int memwarn_set_thread_name(const char *name) {
    return prctl(PR_SET_NAME, (unsigned long)name, 0UL, 0UL, 0UL);
}

/// Forks a child that joins the cgroup whose `cgroup.procs` is open for writing as
/// `procs_fd` (writing "0" moves the writer, on cgroup v1 and v2), resets its signal mask and
/// dispositions (a parent may ignore SIGINT/SIGTERM; ignored signals survive exec), and execs
/// `path` with `argv` and `envp` — so the command's first instruction already runs under the
/// cgroup's limit. When `stdout_fd` is not -1 it becomes the child's standard output.
/// Between fork and exec it calls only async-signal-safe functions.
/// With `parent_death_signal` not 0, the child gets that signal when the thread that forked it
/// ends (PR_SET_PDEATHSIG; call from a thread that lives until the child is reaped), and exits
/// 126 at once if the parent died before the request took effect.
/// Returns the child's pid, or -errno when fork failed. The child exits 126 when it cannot
/// join the cgroup and 127 when exec fails.
static inline int memwarn_spawn_in_cgroup(int procs_fd, const char *path, char *const argv[], char *const envp[], int stdout_fd,
                                          int parent_death_signal) {
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) return -errno;
    if (pid == 0) {
        if (parent_death_signal != 0) {
            if (prctl(PR_SET_PDEATHSIG, (unsigned long)parent_death_signal, 0UL, 0UL, 0UL) != 0) _exit(126);
            if (getppid() != parent) _exit(126);  // the parent died before the request took effect
        }
        sigset_t empty;
        sigemptyset(&empty);
        sigprocmask(SIG_SETMASK, &empty, NULL);
        for (int sig = 1; sig < 32; sig++) {
            if (sig != SIGKILL && sig != SIGSTOP) signal(sig, SIG_DFL);
        }
        if (write(procs_fd, "0\n", 2) != 2) _exit(126);
        close(procs_fd);
        if (stdout_fd != -1) {
            if (dup2(stdout_fd, STDOUT_FILENO) < 0) _exit(126);
            close(stdout_fd);
        }
        execve(path, argv, envp);
        _exit(127);
    }
    return pid;
}

/// Asks the CPU to start loading the cache lines at and just before an address, for
/// writing. A prefetch never faults, so any address may be given.
static inline void memwarn_prefetch_for_write(const void *address) {
    __builtin_prefetch(address, 1, 3);
    __builtin_prefetch((const char *)address - 16, 1, 3);
}

/// Accepts a connection as a non-blocking, close-on-exec descriptor in one call, so a child
/// spawned meanwhile never inherits it (glibc declares accept4 only under _GNU_SOURCE).
static inline int memwarn_accept_nonblocking(int listener) {
    return (int)syscall(SYS_accept4, listener, (void *)0, (void *)0, SOCK_NONBLOCK | SOCK_CLOEXEC);
}

/// The credentials of a Unix socket's peer (SO_PEERCRED), as the kernel recorded them at
/// connect. glibc defines `struct ucred` only under _GNU_SOURCE, so its layout is spelled
/// out here. Returns 0, or -1 with errno set.
static inline int memwarn_peer_credentials(int descriptor, pid_t *pid, uid_t *uid, gid_t *gid) {
    struct { pid_t pid; uid_t uid; gid_t gid; } credentials;
    socklen_t length = sizeof credentials;
    if (getsockopt(descriptor, SOL_SOCKET, SO_PEERCRED, &credentials, &length) != 0) return -1;
    *pid = credentials.pid;
    *uid = credentials.uid;
    *gid = credentials.gid;
    return 0;
}

/// unshare(2), which glibc declares only under _GNU_SOURCE: new namespaces for this process
/// (the v2 scenarios' container: a cgroup and a mount namespace). Returns 0, or -1 with errno.
static inline int memwarn_unshare(int flags) {
    return (int)syscall(SYS_unshare, flags);
}
#endif
#endif
