// failslab-test: no system call panics the kernel when the kernel heap is exhausted. With the
// kernel booted with `failslab`, SYS_FAIL_NTH (1003, this kernel's version of Linux's
// /proc/self/task/TID/fail-nth) makes the Nth heap allocation the kernel makes for this thread
// fail. Each case runs one system call with N = 1, 2, 3... until a run needs fewer than N
// allocations: every run that met the failure must fail with ENOMEM (EAGAIN where Linux says
// so) and leave no trace (no descriptor, child, thread or pipe byte, no file, link, directory
// or mount made or lost in /tmp/failslab), every other run must succeed. Calls that act on every process (kill(-1), the truncation of a memfd that several
// processes map) must reach all of them in every run. An allocation on those paths that were still infallible would panic the kernel
// instead; scripts/test also checks that every frame came back at the end.
// Built by scripts/test with aarch64-linux-gnu-gcc -static; on a kernel without the knob
// (ENOSYS), Linux included, it says so and exits 0 having run nothing.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <dirent.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/select.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/shm.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

#define SYS_FAIL_NTH 1003
/* The most allocations one call may need before the sweep calls it a runaway. */
#define MAX_N 4000

static long fail_nth(long n) { return syscall(SYS_FAIL_NTH, n); }

/* One system call under test: returns its raw result (-errno on failure); `undo` makes a
 * success leave nothing behind, so the next run starts from the same state. */
struct call {
    long (*run)(void);
    void (*undo)(long result); /* after each run, unarmed */
    long want_ok;     /* what a successful run returns (-1: any value >= 0) */
    long want_failed; /* what a run that met the failure returns (-ENOMEM, -EAGAIN) */
    long also_failed; /* another answer Linux allows for it (0: none) */
    void (*setup)(void); /* before each run, unarmed */
    int no_warmup;       /* the first run would leave room that hides later allocations */
};

/* The sweep; returns how many runs met an injected failure (-1 when a check failed). */
static int failures_injected;
static int sweep(const char *name, const struct call *c) {
    if (!c->no_warmup) {
        if (c->setup) c->setup();
        long warm = c->run(); /* touches every page the call uses, so no fault allocates later */
        if (c->undo) c->undo(warm);
    }
    for (long n = 1; n <= MAX_N; n++) {
        if (c->setup) c->setup();
        fail_nth(n);
        long r = c->run();
        long left = fail_nth(0);
        if (left == 0) {
            if (r != c->want_failed && (c->also_failed == 0 || r != c->also_failed)) {
                printf("    %s: allocation %ld failed, the call returned %ld, not %ld\n", name, n, r,
                       c->want_failed);
                return -1;
            }
            failures_injected++;
            if (c->undo) c->undo(r);
            continue;
        }
        int ok = c->want_ok == -1 ? r >= 0 : r == c->want_ok;
        if (!ok) {
            printf("    %s: with no allocation failing the call returned %ld\n", name, r);
            return -1;
        }
        if (c->undo) c->undo(r);
        printf("    %s: %ld allocations, each failure an error return\n", name, n - 1);
        return (int)(n - 1);
    }
    printf("    %s: still allocating after %d allocations\n", name, MAX_N);
    return -1;
}

static long ret(long r) { return r < 0 ? -errno : r; }

// ---- descriptors, pipes, poll and select ------------------------------------------------------

static int p[2]; /* a pipe the I/O cases use */
static char buf[3][8];

static void drain(long r) {
    (void)r;
    char sink[64];
    while (read(p[0], sink, sizeof sink) > 0) {}
}

static void put5(void) {
    if (write(p[1], "12345", 5) != 5) printf("    setup: write failed\n");
}

static long do_writev(void) {
    struct iovec iov[3] = {{"ab", 2}, {"cd", 2}, {"e", 1}};
    return ret(writev(p[1], iov, 3));
}

/* A failed read must leave the five bytes in the pipe: the undo checks, then empties it. */
static void five_left_or_none(long r) {
    char sink[16];
    long n = read(p[0], sink, sizeof sink);
    long want = r < 0 ? 5 : 0;
    if ((n < 0 ? 0 : n) != want) {
        printf("    %ld bytes left in the pipe after the call returned %ld\n", n, r);
        failed_here = 1;
    }
    drain(0);
}

static long do_readv(void) {
    struct iovec iov[3] = {{buf[0], 2}, {buf[1], 2}, {buf[2], 8}};
    return ret(readv(p[0], iov, 3));
}

static long do_read(void) { return ret(read(p[0], buf[0], sizeof buf[0])); }

static long do_ppoll(void) {
    struct pollfd fds[2] = {{p[0], POLLIN, 0}, {p[1], POLLOUT, 0}};
    struct timespec zero = {0, 0};
    return ret(ppoll(fds, 2, &zero, NULL));
}

static long do_pselect(void) {
    fd_set rd, wr;
    FD_ZERO(&rd);
    FD_ZERO(&wr);
    FD_SET(p[0], &rd);
    FD_SET(p[1], &wr);
    struct timespec zero = {0, 0};
    return ret(pselect(p[1] + 1, &rd, &wr, NULL, &zero, NULL));
}

static int lowest_free_fd(void) {
    int fd = dup(0);
    close(fd);
    return fd;
}

static int new_pipe[2];
static long do_pipe2(void) { return ret(syscall(SYS_pipe2, new_pipe, O_CLOEXEC)); }
static void close_pipe(long r) {
    if (r == 0) {
        close(new_pipe[0]);
        close(new_pipe[1]);
    }
}

static long do_dup3(void) { return ret(dup3(0, 900, 0)); }
static void close_900(long r) {
    if (r >= 0) close(900);
}

static long do_execve_path_error(void) {
    /* A path lookup (read into the kernel, one byte at a time) that ends in ENOENT. */
    return ret(access("/no/such/file/in/the/initramfs", F_OK));
}

static void test_pipes_poll_select(void) {
    CHECK(pipe2(p, O_NONBLOCK) == 0, "pipe2: %s", strerror(errno));
    struct call writev_call = {do_writev, drain, 5, -ENOMEM, 0, NULL, 0};
    struct call readv_call = {do_readv, five_left_or_none, 5, -ENOMEM, 0, put5, 0};
    struct call read_call = {do_read, five_left_or_none, 5, -ENOMEM, 0, put5, 0};
    struct call ppoll_call = {do_ppoll, drain, 2, -ENOMEM, 0, put5, 0};
    struct call pselect_call = {do_pselect, drain, 2, -ENOMEM, 0, put5, 0};
    struct call path_call = {do_execve_path_error, NULL, -ENOENT, -ENOMEM, 0, NULL, 0};
    CHECK(sweep("writev", &writev_call) >= 1, "writev allocates its iovec array");
    CHECK(sweep("readv", &readv_call) >= 1, "readv allocates");
    CHECK(sweep("read", &read_call) >= 1, "read allocates its buffer");
    CHECK(sweep("ppoll", &ppoll_call) >= 1, "ppoll allocates its entries");
    CHECK(sweep("pselect6", &pselect_call) >= 1, "pselect6 allocates its bitmaps");
    CHECK(sweep("faccessat", &path_call) >= 1, "a path is read into the heap");
    close(p[0]);
    close(p[1]);
}

static void test_descriptors(void) {
    int lowest = lowest_free_fd();
    struct call pipe_call = {do_pipe2, close_pipe, 0, -ENOMEM, 0, NULL, 0};
    CHECK(sweep("pipe2", &pipe_call) >= 3, "pipe2 allocates a buffer and three objects");
    CHECK(lowest_free_fd() == lowest, "a failed pipe2 left a descriptor: lowest free %d, was %d",
          lowest_free_fd(), lowest);
    /* No warm-up: the table keeps the room it grew (its pages are touched already). */
    struct call dup_call = {do_dup3, close_900, 900, -ENOMEM, 0, NULL, 1};
    CHECK(sweep("dup3 to 900", &dup_call) >= 1, "the table grows to 900");
    CHECK(fcntl(900, F_GETFD) == -1 && errno == EBADF, "a failed dup3 left descriptor 900 open");
}

// ---- the event loop: epoll, eventfd, timerfd, signalfd, pidfd ----------------------------------
// Each object is a few allocations (the object, the open file description, the descriptor table's
// room); an epoll item a few more (the item, room in the epoll, in the watch table and in the
// description's list of watchers). A failure must leave no descriptor and no item behind: the
// next run's EPOLL_CTL_ADD of the same descriptor must succeed, not say EEXIST.

static void close_result(long r) {
    if (r >= 0) close((int)r);
}

static long do_epoll_create(void) { return ret(epoll_create1(EPOLL_CLOEXEC)); }
static long do_eventfd(void) { return ret(eventfd(3, EFD_NONBLOCK)); }
static long do_timerfd(void) { return ret(timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK)); }
static long do_signalfd(void) {
    sigset_t m;
    sigemptyset(&m);
    sigaddset(&m, SIGUSR2);
    return ret(signalfd(-1, &m, SFD_NONBLOCK));
}
static long do_pidfd(void) { return ret(syscall(SYS_pidfd_open, getpid(), 0)); }

static int ep = -1, watched = -1, sig_fd = -1;
static long do_epoll_add(void) {
    struct epoll_event e = {.events = EPOLLIN | EPOLLET, .data.u64 = 5};
    return ret(epoll_ctl(ep, EPOLL_CTL_ADD, watched, &e));
}
static void epoll_del(long r) {
    if (r == 0) epoll_ctl(ep, EPOLL_CTL_DEL, watched, NULL);
}
static long do_epoll_wait(void) {
    struct epoll_event ev[2];
    return ret(epoll_wait(ep, ev, 2, 0));
}
static void raise_usr2(void) { raise(SIGUSR2); }
static long do_signalfd_read(void) {
    struct signalfd_siginfo si;
    return ret(read(sig_fd, &si, sizeof si));
}
/* A failed read must leave the signal pending (it is taken only once there is room for it). */
static void usr2_taken_or_pending(long r) {
    sigset_t pending;
    sigpending(&pending);
    if (r < 0 && !sigismember(&pending, SIGUSR2)) {
        printf("    a failed signalfd read lost the signal\n");
        failed_here = 1;
    }
    struct signalfd_siginfo si;
    while (read(sig_fd, &si, sizeof si) > 0) {}
}
static int self_pidfd = -1;
static long do_process_madvise(void) {
    static char page[4096] __attribute__((aligned(4096)));
    page[0] = 1;
    struct iovec iov[2] = {{page, 4096}, {page, 4096}};
    return ret(syscall(SYS_process_madvise, self_pidfd, iov, 2, MADV_COLD, 0));
}

static void test_event_calls(void) {
    int lowest = lowest_free_fd();
    struct call create_calls[] = {
        {do_epoll_create, close_result, -1, -ENOMEM, 0, NULL, 0},
        {do_eventfd, close_result, -1, -ENOMEM, 0, NULL, 0},
        {do_timerfd, close_result, -1, -ENOMEM, 0, NULL, 0},
        {do_signalfd, close_result, -1, -ENOMEM, 0, NULL, 0},
        {do_pidfd, close_result, -1, -ENOMEM, 0, NULL, 0},
    };
    const char *names[] = {"epoll_create1", "eventfd2", "timerfd_create", "signalfd4", "pidfd_open"};
    for (int i = 0; i < 5; i++) CHECK(sweep(names[i], &create_calls[i]) >= 2, "%s: the object and its open file", names[i]);
    CHECK(lowest_free_fd() == lowest, "a failed creation left a descriptor: lowest free %d, was %d", lowest_free_fd(), lowest);
    ep = epoll_create1(0);
    watched = eventfd(1, EFD_NONBLOCK);
    CHECK(ep >= 0 && watched >= 0, "setup: %s", strerror(errno));
    struct call add_call = {do_epoll_add, epoll_del, 0, -ENOMEM, 0, NULL, 0};
    CHECK(sweep("epoll_ctl (add)", &add_call) >= 1, "an item needs heap");
    CHECK(do_epoll_add() == 0, "the descriptor can be added once more: nothing was left behind");
    struct call wait_call = {do_epoll_wait, NULL, -1, -ENOMEM, 0, NULL, 0};
    CHECK(sweep("epoll_wait", &wait_call) == 0, "epoll_wait allocates nothing (room is made when an item is added)");
    close(watched);
    struct epoll_event ev;
    CHECK(epoll_wait(ep, &ev, 1, 0) == 0, "the closed descriptor's item is gone");
    close(ep);
    sigset_t m;
    sigemptyset(&m);
    sigaddset(&m, SIGUSR2);
    sigprocmask(SIG_BLOCK, &m, NULL);
    sig_fd = signalfd(-1, &m, SFD_NONBLOCK);
    CHECK(sig_fd >= 0, "signalfd: %s", strerror(errno));
    struct call read_call = {do_signalfd_read, usr2_taken_or_pending, sizeof(struct signalfd_siginfo), -ENOMEM, 0, raise_usr2, 0};
    CHECK(sweep("signalfd read", &read_call) >= 1, "a read allocates its records");
    close(sig_fd);
    self_pidfd = (int)syscall(SYS_pidfd_open, getpid(), 0);
    CHECK(self_pidfd >= 0, "pidfd_open: %s", strerror(errno));
    /* A failure advising the second range returns the first's bytes, as Linux does. */
    struct call madvise_call = {do_process_madvise, NULL, 2 * 4096, -ENOMEM, 4096, NULL, 0};
    CHECK(sweep("process_madvise", &madvise_call) >= 1, "the ranges are read into the heap");
    close(self_pidfd);
}

// ---- futex, threads, fork, execve --------------------------------------------------------------

static uint32_t futex_word;
static long do_futex_wait(void) {
    struct timespec t = {0, 1000000};
    return ret(syscall(SYS_futex, &futex_word, FUTEX_WAIT_PRIVATE, 0, &t, NULL, 0));
}

static void test_futex_wait_needs_no_heap(void) {
    struct call c = {do_futex_wait, NULL, -ETIMEDOUT, -ENOMEM, 0, NULL, 0};
    CHECK(sweep("futex wait", &c) == 0, "a futex wait allocates nothing (room is made at clone)");
}

/* A thread that exits at once, started with a raw clone (no libc: nothing but the call). */
static char thread_stack[16384] __attribute__((aligned(16)));
static long do_clone_thread(void) {
    register long x0 __asm__("x0") =
        CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD | CLONE_SYSVSEM;
    register long x1 __asm__("x1") = (long)(thread_stack + sizeof thread_stack);
    register long x2 __asm__("x2") = 0, x3 __asm__("x3") = 0, x4 __asm__("x4") = 0;
    register long x8 __asm__("x8") = SYS_clone;
    __asm__ volatile("svc #0\n"
                     "cbnz x0, 1f\n"
                     "mov x8, #93\n" /* exit: this thread only */
                     "svc #0\n"
                     "1:\n"
                     : "+r"(x0)
                     : "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x8)
                     : "memory", "cc");
    return x0;
}

static void let_thread_exit(long r) {
    (void)r;
    struct timespec t = {0, 2000000};
    nanosleep(&t, NULL);
}

static long do_fork(void) {
    long r = ret(syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0));
    if (r == 0) _exit(7);
    return r;
}

static void reap(long pid) {
    int status = 0;
    if (pid > 0 && (waitpid((pid_t)pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 7))
        printf("    the forked child did not exit with 7 (status %#x)\n", status);
}

static void test_threads_and_fork(void) {
    struct call thread_call = {do_clone_thread, let_thread_exit, -1, -ENOMEM, -EAGAIN, NULL, 0};
    CHECK(sweep("clone (thread)", &thread_call) >= 1, "a thread needs heap");
    fflush(stdout);
    struct call fork_call = {do_fork, reap, -1, -ENOMEM, -EAGAIN, NULL, 0};
    CHECK(sweep("fork", &fork_call) >= 5, "fork copies the maps, signals, descriptors");
    CHECK(waitpid(-1, NULL, WNOHANG) == -1 && errno == ECHILD, "a failed fork left a child");
}

// ---- the memory calls and the page fault -------------------------------------------------------
// Each failure is ENOMEM, as Linux's (a split or a new area that cannot be had; brk returns the
// old break); a page fault whose allocation fails is retried, as Linux's pagefault_out_of_memory
// does when nobody was OOM-killed, so the program sees nothing but the right data.

static long pg;
static char *area;        /* three pages, mapped before each run */
static long break_now;    /* the break before the run */
static int mem_fd = -1;   /* a memfd of four pages */

static void map_three(void) {
    area = mmap(NULL, 3 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (area == MAP_FAILED) printf("    setup: mmap failed\n");
    else for (int i = 0; i < 3; i++) area[i * pg] = 1; /* present: a move carries them */
}
static void unmap_three(long r) {
    (void)r;
    munmap(area, 3 * pg);
}
static void unmap_result(long r) {
    if (r >= 0) munmap((void *)r, 4 * pg);
}

static long do_mmap_anon(void) {
    return ret((long)mmap(NULL, 4 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
}
static long do_mmap_memfd(void) {
    return ret((long)mmap(NULL, 4 * pg, PROT_READ | PROT_WRITE, MAP_SHARED, mem_fd, 0));
}
/* The middle page of three: the area splits in two (munmap) or three (mprotect, madvise). */
static long do_munmap_middle(void) { return ret(munmap(area + pg, pg)); }
static long do_mprotect_middle(void) { return ret(mprotect(area + pg, pg, PROT_READ)); }
static long do_madvise_middle(void) { return ret(madvise(area + pg, pg, MADV_DONTFORK)); }
/* Grown and moved into an unused 512 GiB of the address space: the table pages the new place
 * needs (three levels) are had before anything moves. (A move near its old place needs none:
 * its pages go entry by entry into tables that are there.) */
static long do_mremap_grow(void) {
    long r = ret((long)mremap(area, 3 * pg, 64 * pg, MREMAP_MAYMOVE | MREMAP_FIXED, (void *)0x600000000000UL));
    if (r >= 0) area = (char *)r;
    return r;
}
static void unmap_grown(long r) { munmap(area, r >= 0 ? 64 * pg : 3 * pg); }

static void note_break(void) { break_now = syscall(SYS_brk, 0); }
static long do_brk_grow(void) { return syscall(SYS_brk, break_now + 16 * pg); }
static void brk_back(long r) {
    (void)r;
    syscall(SYS_brk, break_now);
}

/* A first touch of a page in an unused 512 GiB of the address space: its page-table pages (three
 * levels) and its frame are allocated by the fault. */
static long do_fault(void) {
    area[0] = 42;
    return area[0];
}
static void map_far(void) {
    area = mmap((void *)0x600000000000UL, pg, PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (area == MAP_FAILED) printf("    setup: mmap failed\n");
}
static void unmap_far(long r) {
    (void)r;
    munmap(area, pg);
}
/* A first touch of a memfd's page: the object's page and its index grow in the fault. */
static void map_memfd(void) {
    ftruncate(mem_fd, 0);
    ftruncate(mem_fd, 4 * pg);
    area = mmap(NULL, 4 * pg, PROT_READ | PROT_WRITE, MAP_SHARED, mem_fd, 0);
    if (area == MAP_FAILED) printf("    setup: mmap failed\n");
}
static void unmap_memfd(long r) {
    (void)r;
    munmap(area, 4 * pg);
}

static void test_memory_calls(void) {
    pg = sysconf(_SC_PAGESIZE);
    mem_fd = (int)syscall(SYS_memfd_create, "failslab", 0);
    CHECK(mem_fd >= 0 && ftruncate(mem_fd, 4 * pg) == 0, "memfd: %s", strerror(errno));
    /* No warm-ups: the room a first run would make (the area tree's nodes, the list of object
     * backings) is what allocates; these calls touch no user page. */
    struct call mmap_anon = {do_mmap_anon, unmap_result, -1, -ENOMEM, 0, NULL, 1};
    struct call mmap_memfd = {do_mmap_memfd, unmap_result, -1, -ENOMEM, 0, NULL, 1};
    struct call munmap_split = {do_munmap_middle, unmap_three, 0, -ENOMEM, 0, map_three, 1};
    struct call mprotect_split = {do_mprotect_middle, unmap_three, 0, -ENOMEM, 0, map_three, 1};
    struct call madvise_split = {do_madvise_middle, unmap_three, 0, -ENOMEM, 0, map_three, 1};
    struct call mremap_grow = {do_mremap_grow, unmap_grown, -1, -ENOMEM, 0, map_three, 1};
    CHECK(sweep("mmap (anonymous)", &mmap_anon) >= 0, "mmap");
    CHECK(sweep("mmap (memfd)", &mmap_memfd) >= 0, "mmap");
    CHECK(sweep("munmap (a split)", &munmap_split) >= 0, "munmap");
    CHECK(sweep("mprotect (a split)", &mprotect_split) >= 0, "mprotect");
    CHECK(sweep("madvise (a split)", &madvise_split) >= 0, "madvise");
    CHECK(sweep("mremap (a move)", &mremap_grow) >= 1, "mremap moves the pages: tables at the new place");
    note_break();
    struct call brk_grow = {do_brk_grow, brk_back, break_now + 16 * pg, break_now, 0, note_break, 0};
    CHECK(sweep("brk", &brk_grow) >= 0, "brk");
    /* No warm-up: the first touch is the point. A failed allocation is retried by the fault, so
     * every run returns the byte written. */
    struct call fault_far = {do_fault, unmap_far, 42, 42, 0, map_far, 1};
    CHECK(sweep("a fault needing table pages", &fault_far) >= 3, "three table pages and a frame");
    struct call fault_memfd = {do_fault, unmap_memfd, 42, 42, 0, map_memfd, 1};
    CHECK(sweep("a fault on a memfd", &fault_memfd) >= 1, "the object's page");
    close(mem_fd);
}

// ---- timers, System V shared memory, futex_waitv, a stack that grows --------------------------

static long do_timer_create(void) {
    struct sigevent ev = {.sigev_notify = SIGEV_NONE};
    int id = -1;
    long r = ret(syscall(SYS_timer_create, CLOCK_MONOTONIC, &ev, &id));
    return r < 0 ? r : id;
}
static void delete_timer(long r) {
    if (r >= 0) syscall(SYS_timer_delete, r);
}

static long do_shmget(void) { return ret(shmget(IPC_PRIVATE, 3 * pg, IPC_CREAT | 0600)); }
static void remove_segment(long r) {
    if (r >= 0) shmctl((int)r, IPC_RMID, NULL);
}
static int segment = -1;
static void make_segment(void) {
    segment = shmget(IPC_PRIVATE, 3 * pg, IPC_CREAT | 0600);
    if (segment < 0) printf("    setup: shmget: %s\n", strerror(errno));
}
static long do_shmat(void) {
    void *a = shmat(segment, NULL, 0);
    return a == (void *)-1 ? -errno : (long)a;
}
static void detach_and_remove(long r) {
    if (r > 0) shmdt((void *)r);
    shmctl(segment, IPC_RMID, NULL);
}

static uint32_t waitv_words[2];
static long do_futex_waitv(void) {
    struct futex_waitv w[2] = {{.val = 0, .uaddr = (uintptr_t)&waitv_words[0], .flags = FUTEX_32 | FUTEX_PRIVATE_FLAG},
                               {.val = 0, .uaddr = (uintptr_t)&waitv_words[1], .flags = FUTEX_32}};
    struct timespec past = {0, 0}; /* absolute: long gone */
    return ret(syscall(SYS_futex_waitv, w, 2, 0, &past, CLOCK_MONOTONIC));
}

/* A stack that grows: a write four pages below a one-page MAP_GROWSDOWN mapping grows it (a tree
 * node) and maps the page; a failed allocation is retried by the fault, as any fault's is.
 * The mapping goes at the top of a room of its own: wherever mmap put it, an accessible mapping
 * could end less than the stack guard gap (256 pages) below it, and a growth into that gap is
 * refused (SIGSEGV; Linux's expand_downwards too), which the randomised mmap base made happen in
 * one run of five. The room's PROT_NONE floor does not count for the gap (Linux's
 * vma_is_accessible), and the seven pages above the floor are free for the growth. */
#define GROW_ROOM 16
static char *grow_room, *stack_top;
static void map_growsdown(void) {
    grow_room = mmap(NULL, GROW_ROOM * pg, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    stack_top = grow_room == MAP_FAILED
                    ? MAP_FAILED
                    : mmap(grow_room + (GROW_ROOM - 1) * pg, pg, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_GROWSDOWN | MAP_FIXED, -1, 0);
    if (stack_top == MAP_FAILED || munmap(stack_top - 7 * pg, 7 * pg) != 0)
        printf("    setup: the MAP_GROWSDOWN mapping and its room failed\n");
}
static long do_grow(void) {
    stack_top[-4 * (long)pg] = 42;
    return stack_top[-4 * (long)pg];
}
static void unmap_grown_stack(long r) {
    (void)r;
    munmap(grow_room, GROW_ROOM * pg);
}

static void test_timers_ipc_waitv_stack(void) {
    pg = sysconf(_SC_PAGESIZE);
    /* Linux's timer_create says EAGAIN when it cannot allocate the timer. */
    struct call timer = {do_timer_create, delete_timer, -1, -EAGAIN, 0, NULL, 1};
    CHECK(sweep("timer_create", &timer) >= 1, "the timer's room");
    struct call get = {do_shmget, remove_segment, -1, -ENOMEM, 0, NULL, 1};
    CHECK(sweep("shmget", &get) >= 1, "the segment");
    struct call attach = {do_shmat, detach_and_remove, -1, -ENOMEM, 0, make_segment, 1};
    CHECK(sweep("shmat", &attach) >= 0, "the attachment's bookkeeping");
    /* The words' list keeps its room from one call to the next: once warmed up, no allocation. */
    struct call waitv = {do_futex_waitv, NULL, -ETIMEDOUT, -ENOMEM, 0, NULL, 0};
    CHECK(sweep("futex_waitv", &waitv) >= 0, "futex_waitv");
    struct call grow = {do_grow, unmap_grown_stack, 42, 42, 0, map_growsdown, 1};
    CHECK(sweep("a fault growing a MAP_GROWSDOWN mapping", &grow) >= 0, "growth");
}

// ---- walks over every process: kill(-1) and a memfd's truncation -----------------------------
// Both must reach every process whatever the heap says (a process left out keeps running, or
// keeps pages past the end of the object): each runs with allocation N = 1, 2, ... failing
// until a run needs fewer than N, and every run must reach the whole tree of processes.

#define TREE 6 /* three children, each with a child of its own: subtrees under pid 1 */
static int reports[2];  /* each process of the tree writes one byte here */
static char *walk_map;  /* a memfd's two pages, mapped shared */
static long page_size;

static void report(char c) {
    if (write(reports[1], &c, 1) != 1) _exit(3);
}

static void on_usr1(int s) { (void)s; }
static void on_bus(int s) {
    (void)s;
    report('B');
    _exit(0);
}

/* What a process of the tree does: reports 'r' (it exists, its page is mapped) and waits for
 * SIGUSR1 (blocked since before the fork, so it cannot be missed); then reports 'k' (kill), or reads its page past the end of the truncated
 * memfd, which must raise SIGBUS ('B'; 'X' when the read returned). */
static void tree_member(int truncation) {
    sigset_t none;
    sigemptyset(&none);
    if (truncation) {
        volatile char c = walk_map[page_size]; /* the page is mapped in this process too */
        (void)c;
    }
    report('r');
    sigsuspend(&none);
    if (!truncation) {
        report('k');
        _exit(0);
    }
    volatile char c = walk_map[page_size];
    (void)c;
    report('X');
    _exit(1);
}

static int spawn_tree(int truncation) {
    fflush(stdout);
    for (int i = 0; i < TREE / 2; i++) {
        pid_t pid = fork();
        if (pid < 0) return -1;
        if (pid == 0) {
            if (fork() < 0) _exit(4);
            tree_member(truncation); /* both the child and its own child */
        }
    }
    return 0;
}

/* Reads `n` report bytes (2 s each at most); returns how many equal `want`. */
static int read_reports(int n, char want) {
    int same = 0;
    for (int i = 0; i < n; i++) {
        struct pollfd pfd = {reports[0], POLLIN, 0};
        char c;
        if (poll(&pfd, 1, 2000) != 1 || read(reports[0], &c, 1) != 1) break;
        same += c == want;
        if (c != want) printf("    a process reported '%c', not '%c'\n", c, want);
    }
    return same;
}

/* Ends what is left of the tree (every process but this one) and reaps it, orphans included. */
static void end_tree(void) {
    kill(-1, SIGKILL);
    while (waitpid(-1, NULL, 0) > 0) {}
    char sink[64];
    while (read(reports[0], sink, sizeof sink) > 0) {}
}

/* SIGUSR1 blocked (the tree inherits it) and caught; the report pipe. */
static int tree_setup(void) {
    sigset_t usr1;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    sigprocmask(SIG_BLOCK, &usr1, NULL);
    signal(SIGUSR1, on_usr1);
    return pipe2(reports, O_CLOEXEC | O_NONBLOCK);
}

static void test_kill_all_under_failure(void) {
    CHECK(tree_setup() == 0, "pipe2: %s", strerror(errno));
    long n = 1;
    for (; n <= MAX_N; n++) {
        CHECK(spawn_tree(0) == 0, "fork: %s", strerror(errno));
        int ready = read_reports(TREE, 'r');
        fail_nth(n);
        long r = ret(kill(-1, SIGUSR1));
        long left = fail_nth(0);
        int reached = read_reports(TREE, 'k');
        end_tree();
        CHECK(ready == TREE, "%d of %d processes started", ready, TREE);
        CHECK(r == 0, "kill(-1) with allocation %ld failing returned %ld", n, r);
        CHECK(reached == TREE, "kill(-1) with allocation %ld failing reached %d of %d processes", n, reached,
              TREE);
        if (left != 0) break;
        failures_injected++;
    }
    printf("    kill(-1): %ld allocations; every run reached all %d processes\n", n - 1, TREE);
    close(reports[0]);
    close(reports[1]);
}

static void test_truncation_under_failure(void) {
    page_size = sysconf(_SC_PAGESIZE);
    int fd = (int)syscall(SYS_memfd_create, "walk", 0);
    CHECK(fd >= 0, "memfd_create: %s", strerror(errno));
    CHECK(ftruncate(fd, 2 * page_size) == 0, "ftruncate: %s", strerror(errno));
    walk_map = mmap(NULL, 2 * page_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    CHECK(walk_map != MAP_FAILED, "mmap: %s", strerror(errno));
    signal(SIGBUS, on_bus);
    CHECK(tree_setup() == 0, "pipe2: %s", strerror(errno));
    long n = 1;
    for (; n <= MAX_N; n++) {
        walk_map[page_size] = 1;
        CHECK(spawn_tree(1) == 0, "fork: %s", strerror(errno));
        int ready = read_reports(TREE, 'r');
        fail_nth(n);
        long r = ret(ftruncate(fd, page_size));
        long left = fail_nth(0);
        kill(-1, SIGUSR1);
        /* Truncated: every process's read past the end is SIGBUS. Refused: every read works. */
        int reached = read_reports(TREE, r == 0 ? 'B' : 'X');
        end_tree();
        CHECK(ready == TREE, "%d of %d processes started", ready, TREE);
        CHECK(r == 0 || (left == 0 && r == -ENOMEM), "ftruncate with allocation %ld failing returned %ld", n, r);
        CHECK(reached == TREE, "ftruncate (%ld) with allocation %ld failing: %d of %d processes lost the page", r,
              n, reached, TREE);
        CHECK(ftruncate(fd, 2 * page_size) == 0, "ftruncate: %s", strerror(errno));
        if (left != 0) break;
        failures_injected++;
    }
    printf("    ftruncate of a memfd mapped by %d processes: %ld allocations; every run reached them all\n", TREE,
           n - 1);
    signal(SIGBUS, SIG_DFL);
    munmap(walk_map, 2 * page_size);
    close(fd);
    close(reports[0]);
    close(reports[1]);
}

// ---- the file calls ---------------------------------------------------------------------------
// Each makes, changes or reads one thing in /tmp/failslab; a run that met the failure must
// return ENOMEM and leave the tree as it was (the undo checks), a run that did not must do
// the whole thing.

#define DIR_ "/tmp/failslab"
static int dir_fd = -1, file_fd = -1;
static char scratch[4096];

static int exists(const char *path) {
    struct stat st;
    return lstat(path, &st) == 0;
}
static void expect(int cond, const char *what, long r) {
    if (!cond) {
        printf("    %s after the call returned %ld\n", what, r);
        failed_here = 1;
    }
}

static long do_open_create(void) { return ret(openat(dir_fd, "new", O_CREAT | O_EXCL | O_RDWR, 0600)); }
static void undo_open_create(long r) {
    expect(r >= 0 ? exists(DIR_ "/new") : !exists(DIR_ "/new"), "the file is there as the result says", r);
    if (r >= 0) close((int)r);
    unlink(DIR_ "/new");
}
static long do_open_existing(void) { return ret(openat(dir_fd, "file", O_RDONLY)); }
static long do_write(void) { return ret(pwrite(file_fd, "12345678", 8, 4096 * 3)); }
static void undo_write(long r) {
    struct stat st;
    fstat(file_fd, &st);
    expect(st.st_size == (r == 8 ? 4096 * 3 + 8 : 5), "the size is as the write's result says", r);
    ftruncate(file_fd, 5);
}
static long do_pread_file(void) { return ret(pread(file_fd, scratch, sizeof scratch, 0)); }
static long do_getdents(void) {
    lseek(dir_fd, 0, SEEK_SET);
    return ret(syscall(SYS_getdents64, dir_fd, scratch, sizeof scratch));
}
static long do_mkdir(void) { return ret(mkdirat(dir_fd, "d", 0755)); }
static void undo_mkdir(long r) {
    expect(r == 0 ? exists(DIR_ "/d") : !exists(DIR_ "/d"), "the directory is there as the result says", r);
    rmdir(DIR_ "/d");
}
static void make_victim(void) {
    int fd = openat(dir_fd, "victim", O_CREAT | O_WRONLY, 0600);
    if (fd >= 0) close(fd);
}
static long do_unlink(void) { return ret(unlinkat(dir_fd, "victim", 0)); }
static void undo_unlink(long r) {
    expect(r == 0 ? !exists(DIR_ "/victim") : exists(DIR_ "/victim"), "the name is there as the result says", r);
    unlink(DIR_ "/victim");
}
static long do_rename(void) { return ret(renameat2(dir_fd, "victim", dir_fd, "renamed", 0)); }
static void undo_rename(long r) {
    expect(r == 0 ? exists(DIR_ "/renamed") && !exists(DIR_ "/victim") : exists(DIR_ "/victim") && !exists(DIR_ "/renamed"),
           "one name, the one the result says", r);
    unlink(DIR_ "/renamed");
    unlink(DIR_ "/victim");
}
static long do_rename_across(void) { return ret(renameat2(dir_fd, "victim", dir_fd, "sub/moved", 0)); }
static void undo_rename_across(long r) {
    expect(r == 0 ? exists(DIR_ "/sub/moved") && !exists(DIR_ "/victim") : exists(DIR_ "/victim") && !exists(DIR_ "/sub/moved"),
           "one name, the one the result says", r);
    unlink(DIR_ "/sub/moved");
    unlink(DIR_ "/victim");
}
static long do_symlink(void) { return ret(symlinkat("file", dir_fd, "link")); }
static void undo_symlink(long r) {
    expect(r == 0 ? exists(DIR_ "/link") : !exists(DIR_ "/link"), "the link is there as the result says", r);
    unlink(DIR_ "/link");
}
static long do_link(void) { return ret(linkat(dir_fd, "file", dir_fd, "hard", 0)); }
static void undo_link(long r) {
    struct stat st;
    stat(DIR_ "/file", &st);
    expect(r == 0 ? st.st_nlink == 2 && exists(DIR_ "/hard") : st.st_nlink == 1 && !exists(DIR_ "/hard"),
           "the link count is as the result says", r);
    unlink(DIR_ "/hard");
}
static long do_statx(void) {
    struct statx sx;
    return ret(statx(dir_fd, "file", 0, STATX_BASIC_STATS, &sx));
}
static long do_mount(void) { return ret(mount("none", DIR_ "/sub", "tmpfs", 0, NULL)); }
static void undo_mount(long r) {
    if (r == 0 && umount2(DIR_ "/sub", 0) != 0) expect(0, "umount of the new mount", r);
    else if (r != 0) expect(umount2(DIR_ "/sub", 0) != 0, "no mount left by the failed call", r);
}
/* sendfile alone is armed: the output is opened before (unarmed) and closed after. */
static int copy_fd = -1;
static void open_copy(void) { copy_fd = openat(dir_fd, "copy", O_CREAT | O_WRONLY | O_TRUNC, 0600); }
static long do_sendfile(void) {
    off_t off = 0;
    return ret(sendfile(copy_fd, file_fd, &off, 5));
}
static void close_copy(long r) {
    (void)r;
    close(copy_fd);
    copy_fd = -1;
}

static void test_file_calls(void) {
    mkdir(DIR_, 0755);
    mkdir(DIR_ "/sub", 0755);
    dir_fd = open(DIR_, O_RDONLY | O_DIRECTORY);
    file_fd = open(DIR_ "/file", O_CREAT | O_RDWR | O_TRUNC, 0600);
    CHECK(dir_fd >= 0 && file_fd >= 0 && write(file_fd, "12345", 5) == 5, "setup: %s", strerror(errno));
    int lowest = lowest_free_fd();
    struct call open_create = {do_open_create, undo_open_create, -1, -ENOMEM, 0, NULL, 0};
    struct call open_existing = {do_open_existing, close_result, -1, -ENOMEM, 0, NULL, 0};
    struct call write_call = {do_write, undo_write, 8, -ENOMEM, 0, NULL, 0};
    struct call pread_call = {do_pread_file, NULL, 5, -ENOMEM, 0, NULL, 0};
    struct call getdents_call = {do_getdents, NULL, -1, -ENOMEM, 0, NULL, 0};
    struct call mkdir_call = {do_mkdir, undo_mkdir, 0, -ENOMEM, 0, NULL, 0};
    struct call unlink_call = {do_unlink, undo_unlink, 0, -ENOMEM, 0, make_victim, 0};
    struct call rename_call = {do_rename, undo_rename, 0, -ENOMEM, 0, make_victim, 0};
    struct call rename_across = {do_rename_across, undo_rename_across, 0, -ENOMEM, 0, make_victim, 0};
    struct call symlink_call = {do_symlink, undo_symlink, 0, -ENOMEM, 0, NULL, 0};
    struct call link_call = {do_link, undo_link, 0, -ENOMEM, 0, NULL, 0};
    struct call statx_call = {do_statx, NULL, 0, -ENOMEM, 0, NULL, 0};
    struct call mount_call = {do_mount, undo_mount, 0, -ENOMEM, 0, NULL, 0};
    struct call sendfile_call = {do_sendfile, close_copy, 5, -ENOMEM, 0, open_copy, 0};
    CHECK(sweep("openat (O_CREAT)", &open_create) >= 2, "a path, a node, a description");
    CHECK(sweep("openat", &open_existing) >= 2, "a path and a description");
    CHECK(sweep("pwrite (a new page)", &write_call) >= 1, "the page's place in the file's index");
    CHECK(sweep("pread", &pread_call) >= 0, "pread");
    CHECK(sweep("getdents64", &getdents_call) >= 1, "the listing's buffer");
    CHECK(sweep("mkdirat", &mkdir_call) >= 2, "a path and a node");
    CHECK(sweep("unlinkat", &unlink_call) >= 1, "a path");
    CHECK(sweep("renameat2", &rename_call) >= 2, "two paths and the new entry");
    CHECK(sweep("renameat2 (another directory)", &rename_across) >= 2, "two paths and the new entry");
    CHECK(sweep("symlinkat", &symlink_call) >= 2, "two paths, the link and its target");
    CHECK(sweep("linkat", &link_call) >= 2, "two paths and the new entry");
    CHECK(sweep("statx", &statx_call) >= 1, "a path");
    CHECK(sweep("mount (tmpfs)", &mount_call) >= 2, "the paths, the file system, the mount");
    CHECK(sweep("sendfile", &sendfile_call) >= 1, "the copy into a new file's page");
    CHECK(lowest_free_fd() == lowest, "a failed call left a descriptor: lowest free %d, was %d", lowest_free_fd(), lowest);
    close(file_fd);
    close(dir_fd);
    unlink(DIR_ "/file");
    unlink(DIR_ "/copy");
    rmdir(DIR_ "/sub");
    CHECK(rmdir(DIR_) == 0, "the directory is empty again: %s", strerror(errno));
}

static char *self_path = "/failslab-test";
static char runs_env[32];
static long do_execve(void) {
    char *argv[] = {self_path, "exec-ok", NULL};
    char *envp[] = {"FROM=failslab", runs_env, NULL};
    return ret(execve(self_path, argv, envp)); /* returns only on failure */
}

static void test_execve(void) {
    /* The sweep runs in a child, whose last execve succeeds and replaces it. */
    fflush(stdout);
    pid_t pid = fork();
    CHECK(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        /* No warm-up: a successful execve would end the sweep at once. Each failed one must
         * come back to this program unchanged, with ENOMEM. The stack is written first, so no
         * copy-on-write fault of the child's falls inside an armed call. */
        volatile char touch[32768];
        memset((char *)touch, 1, sizeof touch);
        for (long n = 1; n <= MAX_N; n++) {
            snprintf(runs_env, sizeof runs_env, "FAILED=%ld", n - 1);
            fail_nth(n);
            long r = do_execve();
            long left = fail_nth(0);
            if (left != 0 || r != -ENOMEM) {
                printf("    execve: allocation %ld failed, the call returned %ld, not %d\n", n, r, -ENOMEM);
                _exit(1);
            }
            if (n % 16 == 0) fflush(stdout);
        }
        _exit(2);
    }
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid, "waitpid: %s", strerror(errno));
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "the execve sweep ended with status %#x (0: the last execve ran the new program)", status);
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "exec-ok") == 0) {
        const char *from = getenv("FROM"), *failed = getenv("FAILED");
        printf("    execve: %s allocations, each failure an error return; then the new program runs (FROM=%s)\n",
               failed ? failed : "?", from ? from : "?");
        return from && strcmp(from, "failslab") == 0 ? 0 : 3;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    printf("failslab-test: pid %d\n", getpid());
    if (fail_nth(0) < 0) {
        printf("failslab-test: no SYS_FAIL_NTH here (%s): nothing to test\n", strerror(errno));
        return 0;
    }
    static const struct test_case cases[] = {
        {"pipes_poll_select", test_pipes_poll_select},
        {"descriptors", test_descriptors},
        {"event_calls", test_event_calls},
        {"futex_wait_needs_no_heap", test_futex_wait_needs_no_heap},
        {"threads_and_fork", test_threads_and_fork},
        {"memory_calls", test_memory_calls},
        {"kill_all_under_failure", test_kill_all_under_failure},
        {"truncation_under_failure", test_truncation_under_failure},
        {"file_calls", test_file_calls},
        {"execve", test_execve},
        {"timers_ipc_waitv_stack", test_timers_ipc_waitv_stack},
    };
    int status = run_cases(cases, sizeof cases / sizeof cases[0], argc, argv, 0, 0);
    printf("failslab-test: %d injected failures, every one an error return\n", failures_injected);
    return status;
}
