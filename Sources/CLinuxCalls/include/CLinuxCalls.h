// The Linux calls Swift's Glibc module does not export, for memwarn's system layer
// (MemwarnSystem): epoll, eventfd, inotify, prctl, malloc_trim, accept4, SO_PEERCRED, unshare, pidfd_open,
// sched_getcpu, futex, and a fork-and-exec into a cgroup. Glibc declares several of them only under _GNU_SOURCE,
// which this header does not define: it would change glibc's struct layouts (fd_set) against
// SwiftGlibc's. Linux only.
#ifndef MEMWARN_CLINUXCALLS_H
#define MEMWARN_CLINUXCALLS_H
#ifdef __linux__
#include <errno.h>
#include <linux/futex.h>
#include <stdint.h>
#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

/// Names the calling thread (prctl is variadic, so Swift cannot call it directly).
static inline int memwarn_set_thread_name(const char *name) {
    return prctl(PR_SET_NAME, (unsigned long)name, 0UL, 0UL, 0UL);
}

/// Forks a child and execs `path` with `argv` and `envp`. Between fork and exec the child
/// calls only async-signal-safe functions, in this order:
/// - with `parent_death_signal` not 0, asks for that signal when the thread that forked it ends
///   (PR_SET_PDEATHSIG; call from a thread that lives until the child is reaped), and exits 126
///   at once if the parent died before the request took effect;
/// - resets its signal mask and dispositions (a parent may ignore SIGINT/SIGTERM; ignored
///   signals survive exec);
/// - with `procs_fd` not -1 (a cgroup's `cgroup.procs`, open for writing), joins that cgroup by
///   writing "0" (the writer moves, on cgroup v1 and v2), so the program's first instruction
///   already runs under the cgroup's limit;
/// - makes `stdin_fd`, `stdout_fd` and `stderr_fd` its standard streams where they are not -1
///   (the others are inherited).
/// Every other descriptor should be close-on-exec; with `close_others` not 0, every descriptor
/// above 2 is closed before exec all the same (`close_range`, or one by one up to the limit on a
/// kernel before 5.9), so the child gets its three streams and nothing its parent inherited.
/// With `new_group` not 0 the child leads a
/// process group of its own (`setpgid(0, 0)`, before it joins the cgroup; the parent sets it too,
/// so that the group exists when this returns), and it and everything it starts can be signalled
/// together. Returns the child's pid, or -errno when fork
/// failed. The child exits 126 when it cannot join the cgroup or set its streams up, and 127
/// when exec fails.
static inline int memwarn_spawn(const char *path, char *const argv[], char *const envp[], int procs_fd,
                                int stdin_fd, int stdout_fd, int stderr_fd, int parent_death_signal, int new_group,
                                int close_others) {
    long open_max = sysconf(_SC_OPEN_MAX);  // before fork: only for the fallback below
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
        if (new_group != 0 && setpgid(0, 0) != 0) _exit(126);
        if (procs_fd != -1) {
            if (write(procs_fd, "0\n", 2) != 2) _exit(126);
            close(procs_fd);
        }
        int streams[3] = {stdin_fd, stdout_fd, stderr_fd};
        for (int target = 0; target < 3; target++) {
            // A stream given as a low descriptor that another stream's dup2 would overwrite
            // first is moved above 2 (close-on-exec) before any dup2.
            if (streams[target] >= 0 && streams[target] < 3 && streams[target] != target) {
                streams[target] = fcntl(streams[target], F_DUPFD_CLOEXEC, 3);
                if (streams[target] < 0) _exit(126);
            }
        }
        for (int target = 0; target < 3; target++) {
            if (streams[target] == target) {
                if (fcntl(target, F_SETFD, 0) != 0) _exit(126);  // already in place: keep it open across exec
            } else if (streams[target] != -1 && dup2(streams[target], target) < 0) {
                _exit(126);
            }
        }
        if (close_others != 0) {
#ifdef SYS_close_range
            if (syscall(SYS_close_range, 3U, ~0U, 0U) != 0)
#endif
            {
                for (long fd = 3; fd < open_max; fd++) close((int)fd);
            }
        }
        execve(path, argv, envp);
        _exit(127);
    }
    if (new_group != 0) setpgid(pid, pid);  // EACCES once the child has exec'd: it set it itself
    return pid;
}

/// Heap blocks in use in every malloc arena plus mmapped chunks: `mallinfo2` on glibc 2.33 and
/// later; before it, `mallinfo`, whose int fields wrap past 2 GiB. It walks each arena's free
/// lists with the arena locked: call it now and then, not per allocation.
static inline unsigned long long memwarn_heap_in_use_bytes(void) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
    struct mallinfo2 info = mallinfo2();
    return (unsigned long long)info.uordblks + (unsigned long long)info.hblkhd;
#else
    struct mallinfo info = mallinfo();
    return (unsigned long long)(unsigned int)info.uordblks + (unsigned long long)(unsigned int)info.hblkhd;
#endif
}

/// Asks the CPU to start loading the cache lines at and just before an address, for
/// writing. A prefetch never faults, so any address may be given.
static inline void memwarn_prefetch_for_write(const void *address) {
    __builtin_prefetch(address, 1, 3);
    __builtin_prefetch((const char *)address - 16, 1, 3);
}

/// The CPU the calling thread runs on, or -1. glibc declares it only under _GNU_SOURCE (see the
/// top of this file); the symbol is always there. glibc (2.35 and later) reads it from the
/// thread's rseq area, without a system call: a few nanoseconds.
extern int sched_getcpu(void);

#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 35))
#include <sys/rseq.h>
// glibc registers the area only on architectures it defines a signature for.
#ifdef RSEQ_SIG
#define MEMWARN_HAVE_RSEQ_AREA 1
#endif
#endif

/// The CPU the calling thread runs on, or -1, as `sched_getcpu` answers, without its call:
/// glibc 2.35 and later register an rseq area for every thread, where the kernel keeps the
/// thread's CPU, at `__rseq_offset` from the thread pointer (glibc's documented ABI), and
/// `sched_getcpu` only reads it. Read here inline, it costs one load (measured on the 2-CPU
/// machine: 0.7 ns against 4.3 ns for the call). When the area was not registered (a kernel
/// without rseq, or `glibc.pthread.rseq=0`) its CPU field is negative, and `sched_getcpu` answers,
/// as glibc's own code does; so it does on other C libraries (musl: the static SDK).
static inline int memwarn_current_cpu(void) {
#ifdef MEMWARN_HAVE_RSEQ_AREA
    const struct rseq *area = (const struct rseq *)((char *)__builtin_thread_pointer() + __rseq_offset);
    int cpu = (int)__atomic_load_n(&area->cpu_id, __ATOMIC_RELAXED);
    if (cpu >= 0) return cpu;
#endif
    return sched_getcpu();
}

/// Accepts a connection as a non-blocking, close-on-exec descriptor in one call, so a child
/// spawned meanwhile never inherits it.
static inline int memwarn_accept_nonblocking(int listener) {
    return (int)syscall(SYS_accept4, listener, (void *)0, (void *)0, SOCK_NONBLOCK | SOCK_CLOEXEC);
}

/// The credentials of a Unix socket's peer (SO_PEERCRED), as the kernel recorded them at
/// connect. `struct ucred` is spelled out (glibc defines it only under _GNU_SOURCE).
/// Returns 0, or -1 with errno set.
static inline int memwarn_peer_credentials(int descriptor, pid_t *pid, uid_t *uid, gid_t *gid) {
    struct { pid_t pid; uid_t uid; gid_t gid; } credentials;
    socklen_t length = sizeof credentials;
    if (getsockopt(descriptor, SOL_SOCKET, SO_PEERCRED, &credentials, &length) != 0) return -1;
    *pid = credentials.pid;
    *uid = credentials.uid;
    *gid = credentials.gid;
    return 0;
}

/// pipe2(2) with O_CLOEXEC: both ends close-on-exec from the start, so a child another thread
/// spawns meanwhile never inherits them. Returns 0, or -1 with errno.
static inline int memwarn_pipe_cloexec(int ends[2]) {
    return (int)syscall(SYS_pipe2, ends, O_CLOEXEC);
}

/// unshare(2): new namespaces for this process (the v2 scenarios' container: a cgroup and a
/// mount namespace). Returns 0, or -1 with errno.
static inline int memwarn_unshare(int flags) {
    return (int)syscall(SYS_unshare, flags);
}

/// pidfd_open(2) (Linux 5.3): a descriptor that becomes readable when the process ends (the
/// monitor watches a node agent's this way). Returns the descriptor (close-on-exec), or -1
/// with errno.
static inline int memwarn_pidfd_open(pid_t pid) {
#ifdef SYS_pidfd_open
    return (int)syscall(SYS_pidfd_open, pid, 0);
#else
    errno = ENOSYS;
    return -1;
#endif
}
/// futex(2) FUTEX_WAIT_PRIVATE: sleeps while the 32-bit word at `word` (an aligned atomic
/// uint32_t) holds `expected` (checked atomically with going to sleep), until a wake on the same
/// word. Returns 0 when woken, or -1 with errno: EAGAIN when the word no longer held `expected`,
/// EINTR on a signal.
static inline int memwarn_futex_wait(void *word, uint32_t expected) {
    return (int)syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, expected, (void *)0, (void *)0, 0);
}

/// futex(2) FUTEX_WAKE_PRIVATE: wakes at most `count` threads asleep on `word`. Returns how
/// many it woke, or -1 with errno.
static inline int memwarn_futex_wake(void *word, int count) {
    return (int)syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, count, (void *)0, (void *)0, 0);
}
#endif
#endif
