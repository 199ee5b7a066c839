// fork-test: processes as an unmodified static glibc program sees them: fork with copy-on-write
// isolation, wait4/waitpid/waitid statuses (exit codes, fatal signals, WNOHANG, ECHILD), getppid,
// fork from a multi-threaded parent, pipes between processes (data, end of file, EPIPE and
// SIGPIPE, O_NONBLOCK, O_CLOEXEC across execve; whole blocking writes, atomic ones up to
// PIPE_BUF, short non-blocking ones, a count when a signal interrupts; poll and select waking on
// a pipe), vfork + execve (argv, envp, E2BIG, EFAULT,
// ENOENT), MADV_DONTFORK/MADV_WIPEONFORK and MAP_SHARED|MAP_ANONYMOUS across fork, and a memfd's
// truncation racing a fork (the child's mapping past the new end is SIGBUS).
// Reading untouched private anonymous memory holds no memory (the shared zero page).
// Each case prints "ok - NAME" or "FAIL - NAME"; the last line is "N passed, N failed".
// "fork-test measure" measures fork + exit + wait of a process with 64 MiB touched.
// Built by scripts/test with aarch64-linux-gnu-gcc -static; runs unchanged on Linux too.
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

static char *self_path = "/fork-test";

static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void sleep_ms(int ms) {
    struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000};
    nanosleep(&t, NULL);
}

static pid_t spawn(void) {
    fflush(stdout);
    return fork();
}

// ---- fork and copy-on-write -------------------------------------------------------------------

static char global_data[64 << 10] = {1};

static void test_fork_isolates_memory(void) {
    memset(global_data, 'p', sizeof global_data);
    size_t len = 4 << 20;
    char *heap = malloc(len);
    CHECK(heap != NULL, "malloc");
    memset(heap, 'h', len);
    int on_stack = 1234;
    pid_t parent = getpid();
    pid_t pid = spawn();
    CHECK(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        int bad = 0;
        bad |= getppid() != parent;
        bad |= global_data[100] != 'p' || heap[len - 1] != 'h' || on_stack != 1234;
        memset(global_data, 'c', sizeof global_data);
        memset(heap, 'C', len / 2);
        on_stack = 99;
        sleep_ms(20); // the parent writes meanwhile
        bad |= global_data[100] != 'c' || heap[0] != 'C' || heap[len - 1] != 'h' || on_stack != 99;
        _exit(bad ? 1 : 7);
    }
    global_data[100] = 'P';
    heap[len - 1] = 'H';
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid, "waitpid: %s", strerror(errno));
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 7, "status %#x (1: the child saw a wrong value)", status);
    CHECK(global_data[100] == 'P' && global_data[0] == 'p', "parent's globals %c %c", global_data[100], global_data[0]);
    CHECK(heap[0] == 'h' && heap[len - 1] == 'H', "parent's heap %c %c", heap[0], heap[len - 1]);
    CHECK(on_stack == 1234, "parent's stack %d", on_stack);
    free(heap);
}

static void test_wait_statuses(void) {
    pid_t pid = spawn();
    if (pid == 0) _exit(300); // the low byte: 44
    int status;
    CHECK(wait4(pid, &status, 0, NULL) == pid, "wait4");
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 44, "status %#x", status);
    pid = spawn();
    if (pid == 0) {
        volatile uintptr_t null_page = 8;
        *(volatile int *)null_page = 1;
        _exit(0);
    }
    CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV && !WCOREDUMP(status), "status %#x", status);
    pid = spawn();
    if (pid == 0) abort();
    CHECK(waitpid(-1, &status, 0) == pid, "waitpid(-1)");
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, "status %#x", status);
    pid = spawn();
    if (pid == 0) {
        sleep_ms(100);
        exit(3);
    }
    CHECK(waitpid(pid, &status, WNOHANG) == 0, "WNOHANG on a running child");
    siginfo_t info;
    memset(&info, 0xff, sizeof info);
    CHECK(waitid(P_PID, pid, &info, WEXITED | WNOWAIT) == 0, "waitid WNOWAIT: %s", strerror(errno));
    CHECK(info.si_signo == SIGCHLD && info.si_code == CLD_EXITED && info.si_pid == pid && info.si_status == 3,
          "siginfo %d %d %d %d", info.si_signo, info.si_code, info.si_pid, info.si_status);
    CHECK(waitpid(pid, &status, 0) == pid && WEXITSTATUS(status) == 3, "the zombie was kept by WNOWAIT");
    errno = 0;
    CHECK(waitpid(-1, &status, 0) == -1 && errno == ECHILD, "no child left: %d", errno);
    CHECK(waitpid(-1, &status, 0x1000) == -1 && errno == EINVAL, "unknown option: %d", errno);
    CHECK(waitid(P_ALL, 0, &info, 0) == -1 && errno == EINVAL, "waitid without an event: %d", errno);
}

// kill reaches other processes: by pid, by process group, every process (-1); a zombie can be
// signalled; a pid that is gone is ESRCH, which comes before EINVAL for a bad signal.
static void test_kill_reaches_other_processes(void) {
    int ready[2];
    CHECK(pipe(ready) == 0, "pipe");
    pid_t pid = spawn();
    if (pid == 0) {
        setpgid(0, 0);
        write(ready[1], "r", 1);
        for (;;) sleep_ms(1000);
    }
    char c;
    CHECK(read(ready[0], &c, 1) == 1, "the child is ready");
    close(ready[0]);
    close(ready[1]);
    CHECK(kill(pid, 0) == 0, "kill(child, 0): %s", strerror(errno));
    errno = 0;
    CHECK(kill(pid, 999) == -1 && errno == EINVAL, "an invalid signal to a child: %d", errno);
    CHECK(kill(-1, 0) == 0, "kill(-1, 0) with a child: %s", strerror(errno));
    CHECK(kill(-pid, SIGTERM) == 0, "kill(-pgid, SIGTERM): %s", strerror(errno));
    int status;
    CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM, "status %#x", status);
    pid = spawn();
    if (pid == 0)
        for (;;) sleep_ms(1000);
    CHECK(kill(pid, SIGKILL) == 0, "kill(child, SIGKILL): %s", strerror(errno));
    siginfo_t info;
    memset(&info, 0, sizeof info);
    CHECK(waitid(P_PID, pid, &info, WEXITED | WNOWAIT) == 0, "waitid WNOWAIT: %s", strerror(errno));
    CHECK(info.si_code == CLD_KILLED && info.si_status == SIGKILL, "killed: %d %d", info.si_code, info.si_status);
    CHECK(kill(pid, 0) == 0, "a zombie can be signalled: %s", strerror(errno));
    CHECK(waitpid(pid, &status, 0) == pid && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "reaped");
    errno = 0;
    CHECK(kill(pid, 0) == -1 && errno == ESRCH, "a reaped pid is gone: %d", errno);
    errno = 0;
    CHECK(kill(pid, 999) == -1 && errno == ESRCH, "ESRCH comes before EINVAL: %d", errno);
    errno = 0;
    CHECK(kill(INT_MIN, 0) == -1 && errno == ESRCH, "pid INT_MIN: %d", errno);
}

static void test_many_children_and_sigchld(void) {
    enum { N = 16 };
    pid_t pids[N];
    for (int i = 0; i < N; i++) {
        pids[i] = spawn();
        CHECK(pids[i] >= 0, "fork %d: %s", i, strerror(errno));
        if (pids[i] == 0) _exit(i);
    }
    int seen = 0;
    for (int i = 0; i < N; i++) {
        int status;
        pid_t got = wait(&status);
        CHECK(got > 0 && WIFEXITED(status), "wait: %d %#x", got, status);
        for (int j = 0; j < N; j++)
            if (pids[j] == got) seen |= (WEXITSTATUS(status) == j) << j;
    }
    CHECK(seen == (1 << N) - 1, "statuses %#x", seen);
}

// With SIGCHLD ignored no zombie is left: a wait blocks until the child is gone and then finds no
// child (ECHILD), even when it starts while the child's last thread is ending on another CPU
// (Linux decides in exit_notify, before the child is ever a zombie). Many rounds, since that
// window is short.
static void test_ignored_sigchld_leaves_no_zombie(void) {
    signal(SIGCHLD, SIG_IGN);
    int r = -1, err = ECHILD, round = 0;
    for (; round < 200 && r == -1 && err == ECHILD; round++) {
        pid_t pid = spawn();
        if (pid < 0) break;
        if (pid == 0) _exit(0);
        errno = 0;
        r = waitpid(pid, NULL, 0);
        err = errno;
    }
    signal(SIGCHLD, SIG_DFL);
    CHECK(r == -1 && err == ECHILD, "round %d: waitpid %d, errno %d", round, r, err);
}

// A parent whose threads keep writing on every CPU forks repeatedly; each child checks that its
// copy does not change under it.
static volatile int stop_writers;
static volatile uint64_t counters[4][512];
static void *writer(void *arg) {
    volatile uint64_t *mine = counters[(uintptr_t)arg];
    while (!stop_writers) mine[0]++, mine[256]++;
    return NULL;
}

static void test_fork_from_threads(void) {
    pthread_t t[3];
    for (uintptr_t i = 0; i < 3; i++) CHECK(pthread_create(&t[i], NULL, writer, (void *)(i + 1)) == 0, "thread");
    int bad = 0;
    for (int round = 0; round < 20; round++) {
        pid_t pid = spawn();
        if (pid == 0) {
            uint64_t seen[4];
            for (int i = 1; i < 4; i++) seen[i] = counters[i][0];
            sleep_ms(5);
            int same = 1;
            for (int i = 1; i < 4; i++) same &= counters[i][0] == seen[i];
            counters[1][0] = 0; // the child's write stays the child's
            _exit(same ? 0 : 1);
        }
        int status;
        if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) bad++;
    }
    uint64_t before = counters[1][0];
    sleep_ms(5);
    stop_writers = 1;
    for (int i = 0; i < 3; i++) pthread_join(t[i], NULL);
    CHECK(bad == 0, "%d children saw their memory change", bad);
    CHECK(counters[1][0] >= before && counters[1][0] > 0, "the parent's counter %lu", (unsigned long)counters[1][0]);
}

static void test_dontfork_wipeonfork_shared(void) {
    long page = sysconf(_SC_PAGESIZE);
    char *keep = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    char *wipe = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    char *gone = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    char *shared = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    char *untouched = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CHECK(keep != MAP_FAILED && wipe != MAP_FAILED && gone != MAP_FAILED && shared != MAP_FAILED, "mmap");
    keep[0] = 1, wipe[0] = 2, gone[0] = 3, shared[0] = 4;
    CHECK(madvise(wipe, page, MADV_WIPEONFORK) == 0, "MADV_WIPEONFORK: %s", strerror(errno));
    CHECK(madvise(gone, page, MADV_DONTFORK) == 0, "MADV_DONTFORK: %s", strerror(errno));
    pid_t pid = spawn();
    if (pid == 0) {
        int bad = keep[0] != 1 || wipe[0] != 0 || shared[0] != 4;
        // The DONTFORK area is not mapped in the child.
        bad |= (madvise(gone, page, MADV_NORMAL) == 0 || errno != ENOMEM) << 1;
        shared[0] = 5;
        untouched[0] = 6; // shared even though nobody touched it before the fork
        _exit(bad);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status), "waitpid");
    CHECK(WEXITSTATUS(status) == 0, "child saw bits %d", WEXITSTATUS(status));
    CHECK(wipe[0] == 2 && gone[0] == 3, "the parent keeps its pages");
    CHECK(shared[0] == 5 && untouched[0] == 6, "MAP_SHARED: %d %d", shared[0], untouched[0]);
}

// A memfd's truncation racing a fork: one thread shrinks the object while another forks. The
// child's copy of the mapping holds the page past the new end whenever the fork copied the
// parent's table before the truncation reached it; the truncation must reach the child too, so
// the child's read there is SIGBUS in every round, as on Linux.
#define RACE_ROUNDS 200
static char *race_map;
static int race_fd;
static volatile int race_go;
static long race_page;

static void *race_truncate(void *arg) {
    (void)arg;
    while (!race_go) {}
    long r = ftruncate(race_fd, race_page);
    __atomic_store_n(&race_map[0], r == 0 ? 1 : 2, __ATOMIC_RELEASE); /* page 0 stays: the child sees it */
    return NULL;
}

static void test_truncate_races_fork(void) {
    race_page = sysconf(_SC_PAGESIZE);
    race_fd = (int)syscall(SYS_memfd_create, "race", 0);
    CHECK(race_fd >= 0, "memfd_create: %s", strerror(errno));
    int copied = 0;
    for (int round = 0; round < RACE_ROUNDS; round++) {
        CHECK(ftruncate(race_fd, 2 * race_page) == 0, "ftruncate: %s", strerror(errno));
        race_map = mmap(NULL, 2 * race_page, PROT_READ | PROT_WRITE, MAP_SHARED, race_fd, 0);
        CHECK(race_map != MAP_FAILED, "mmap: %s", strerror(errno));
        race_map[0] = 0;
        race_map[race_page] = 1; /* present in the parent's table: fork copies it */
        race_go = 0;
        pthread_t t;
        CHECK(pthread_create(&t, NULL, race_truncate, NULL) == 0, "pthread_create");
        fflush(stdout);
        race_go = 1;
        pid_t pid = fork();
        if (pid == 0) {
            int64_t until = now_ns() + 2000000000;
            char done;
            while ((done = __atomic_load_n(&race_map[0], __ATOMIC_ACQUIRE)) == 0 && now_ns() < until) {}
            if (done != 1) _exit(3); /* the truncation failed, or never came */
            volatile char c = race_map[race_page]; /* past the end: SIGBUS */
            _exit(c == 1 ? 1 : 2);
        }
        CHECK(pid > 0, "fork: %s", strerror(errno));
        pthread_join(t, NULL);
        int status = 0;
        CHECK(waitpid(pid, &status, 0) == pid, "waitpid: %s", strerror(errno));
        CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGBUS,
              "round %d: the child's read past the new end gave status %#x, not SIGBUS", round, status);
        munmap(race_map, 2 * race_page);
        copied++;
    }
    CHECK(copied == RACE_ROUNDS, "%d rounds", copied);
    close(race_fd);
}

// ---- pipes -------------------------------------------------------------------------------------

static void test_pipe_between_processes(void) {
    int fds[2];
    CHECK(pipe2(fds, 0) == 0, "pipe2: %s", strerror(errno));
    enum { TOTAL = 300000 };
    pid_t pid = spawn();
    if (pid == 0) {
        close(fds[1]);
        uint32_t sum = 0;
        long got = 0;
        char buf[7000];
        for (;;) {
            ssize_t n = read(fds[0], buf, sizeof buf);
            if (n <= 0) break;
            for (ssize_t i = 0; i < n; i++) sum = sum * 31 + (unsigned char)buf[i];
            got += n;
        }
        _exit(got == TOTAL ? (int)(sum & 0x7f) : 255);
    }
    close(fds[0]);
    uint32_t sum = 0;
    char buf[10000];
    long sent = 0;
    while (sent < TOTAL) {
        int n = TOTAL - sent < (long)sizeof buf ? TOTAL - sent : (int)sizeof buf;
        for (int i = 0; i < n; i++) buf[i] = (char)((sent + i) * 7);
        ssize_t w = 0;
        while (w < n) {
            ssize_t k = write(fds[1], buf + w, n - w);
            CHECK(k > 0, "write: %s", strerror(errno));
            w += k;
        }
        for (int i = 0; i < n; i++) sum = sum * 31 + (unsigned char)buf[i];
        sent += n;
    }
    close(fds[1]); // end of file for the child
    int status;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status), "waitpid %#x", status);
    CHECK(WEXITSTATUS(status) == (int)(sum & 0x7f), "child checksum %d, want %d", WEXITSTATUS(status), sum & 0x7f);
}

static void test_pipe_edges(void) {
    int fds[2];
    CHECK(pipe2(fds, O_NONBLOCK | O_CLOEXEC) == 0, "pipe2");
    char c;
    CHECK(read(fds[0], &c, 1) == -1 && errno == EAGAIN, "empty O_NONBLOCK read: %d", errno);
    CHECK(fcntl(fds[0], F_GETFD) == FD_CLOEXEC, "O_CLOEXEC");
    CHECK(fcntl(fds[1], F_GETFL) & O_NONBLOCK, "O_NONBLOCK");
    CHECK(isatty(fds[0]) == 0, "a pipe is no terminal");
    long total = 0;
    char buf[4096] = {0};
    for (;;) {
        ssize_t n = write(fds[1], buf, sizeof buf);
        if (n < 0) break;
        total += n;
    }
    CHECK(errno == EAGAIN && total == 65536, "full after %ld bytes: %d", total, errno);
    CHECK(write(fds[0], buf, 1) == -1 && errno == EBADF, "writing the read end");
    close(fds[0]);
    signal(SIGPIPE, SIG_IGN);
    CHECK(write(fds[1], buf, 1) == -1 && errno == EPIPE, "EPIPE: %d", errno);
    signal(SIGPIPE, SIG_DFL);
    close(fds[1]);
    CHECK(pipe2(fds, 0) == 0, "pipe2");
    CHECK(pipe2(fds, 1) == -1 && errno == EINVAL, "pipe2 bad flags");
    close(fds[0]); // before the fork: no process holds a read end
    pid_t pid = spawn();
    if (pid == 0) {
        write(fds[1], "x", 1); // no reader: SIGPIPE ends the child
        _exit(0);
    }
    close(fds[1]);
    int status;
    CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGPIPE, "status %#x", status);
    CHECK(pipe2(fds, 0) == 0, "pipe2");
    close(fds[1]);
    CHECK(read(fds[0], &c, 1) == 0, "end of file without writers");
    close(fds[0]);
}

// Linux's pipe_write: a blocking write larger than the free space waits for room and returns
// only when all of it is in.
static void test_pipe_blocking_write_is_whole(void) {
    int fds[2];
    CHECK(pipe2(fds, 0) == 0, "pipe2: %s", strerror(errno));
    enum { BIG = 200000 };
    static char data[BIG], got[BIG];
    for (int i = 0; i < BIG; i++) data[i] = (char)(i * 13 + i / 4096);
    pid_t pid = spawn();
    if (pid == 0) {
        close(fds[0]);
        ssize_t w = write(fds[1], data, BIG);
        _exit(w == BIG ? 0 : 1);
    }
    close(fds[1]);
    sleep_ms(50); // the writer fills the pipe and waits
    long n = 0;
    for (;;) {
        ssize_t k = read(fds[0], got + n, n + 7000 <= BIG ? 7000 : BIG - n);
        CHECK(k >= 0, "read: %s", strerror(errno));
        if (k == 0) break;
        n += k;
        if (n == BIG) {
            char extra;
            CHECK(read(fds[0], &extra, 1) == 0, "more than was written");
            break;
        }
    }
    close(fds[0]);
    int status;
    CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the write returned short (status %#x)", status);
    CHECK(n == BIG && memcmp(got, data, BIG) == 0, "read %ld bytes, or not the ones written", n);
}

// Writes of up to PIPE_BUF are atomic: records of 4096 bytes from four writers never interleave.
static void test_pipe_small_writes_are_atomic(void) {
    int fds[2];
    CHECK(pipe2(fds, 0) == 0, "pipe2: %s", strerror(errno));
    enum { WRITERS = 4, RECORDS = 48, REC = 4096 };
    pid_t pids[WRITERS];
    for (int w = 0; w < WRITERS; w++) {
        pids[w] = spawn();
        if (pids[w] == 0) {
            close(fds[0]);
            char rec[REC];
            memset(rec, 'a' + w, sizeof rec);
            for (int r = 0; r < RECORDS; r++)
                if (write(fds[1], rec, REC) != REC) _exit(1);
            _exit(0);
        }
    }
    close(fds[1]);
    static char stream[WRITERS * RECORDS * REC];
    long n = 0;
    for (;;) {
        ssize_t k = read(fds[0], stream + n, (long)sizeof stream - n < 3000 ? (long)sizeof stream - n : 3000);
        if (k <= 0) break;
        n += k;
    }
    close(fds[0]);
    for (int w = 0; w < WRITERS; w++) {
        int status;
        CHECK(waitpid(pids[w], &status, 0) == pids[w] && WIFEXITED(status) && WEXITSTATUS(status) == 0,
              "writer %d: status %#x", w, status);
    }
    CHECK(n == (long)sizeof stream, "read %ld bytes of %zu", n, sizeof stream);
    int count[WRITERS] = {0};
    for (long r = 0; r < n / REC; r++) {
        char first = stream[r * REC];
        for (int i = 1; i < REC; i++)
            CHECK(stream[r * REC + i] == first, "record %ld mixes '%c' and '%c' at byte %d", r, first,
                  stream[r * REC + i], i);
        CHECK(first >= 'a' && first < 'a' + WRITERS, "record %ld is '%c'", r, first);
        count[first - 'a']++;
    }
    for (int w = 0; w < WRITERS; w++) CHECK(count[w] == RECORDS, "writer %d: %d records", w, count[w]);
}

// O_NONBLOCK: a write larger than PIPE_BUF takes what fits (a short count), one up to PIPE_BUF
// goes in whole or fails with EAGAIN, and a full pipe says EAGAIN. (Whole pages are read back
// between the writes, where Linux's page-sized buffers and a byte ring agree.)
static void test_pipe_nonblocking_writes(void) {
    int fds[2];
    CHECK(pipe2(fds, O_NONBLOCK) == 0, "pipe2: %s", strerror(errno));
    static char buf[100000];
    CHECK(write(fds[1], buf, sizeof buf) == 65536, "a large write into an empty pipe: %s", strerror(errno));
    CHECK(write(fds[1], buf, 1) == -1 && errno == EAGAIN, "a full pipe");
    CHECK(read(fds[0], buf, 4096) == 4096, "read a page");
    CHECK(write(fds[1], buf, 5000) == 4096, "a large write takes what fits");
    CHECK(write(fds[1], buf, 1) == -1 && errno == EAGAIN, "full again");
    CHECK(read(fds[0], buf, 8192) == 8192, "read two pages");
    CHECK(write(fds[1], buf, 4096) == 4096 && write(fds[1], buf, 4096) == 4096, "two atomic writes fit");
    CHECK(write(fds[1], buf, 100) == -1 && errno == EAGAIN, "an atomic write that does not fit");
    close(fds[0]);
    close(fds[1]);
}

static void on_usr1(int sig) { (void)sig; }

struct interrupter {
    int read_end;
    pthread_t writer;
};

/* Waits until the pipe is full (the writer then waits for room), then signals the writer. */
static void *interrupt_writer(void *arg) {
    struct interrupter *it = arg;
    int queued = 0;
    for (int i = 0; i < 400 && queued < 65536; i++) {
        sleep_ms(5);
        ioctl(it->read_end, FIONREAD, &queued);
    }
    sleep_ms(20);
    pthread_kill(it->writer, SIGUSR1);
    return NULL;
}

// A blocking write that a signal interrupts after some bytes went in returns their count.
static void test_pipe_write_interrupted_returns_count(void) {
    int fds[2];
    CHECK(pipe2(fds, 0) == 0, "pipe2: %s", strerror(errno));
    pid_t pid = spawn();
    if (pid == 0) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_usr1; // no SA_RESTART
        sigaction(SIGUSR1, &sa, NULL);
        struct interrupter it = {fds[0], pthread_self()};
        pthread_t t;
        if (pthread_create(&t, NULL, interrupt_writer, &it) != 0) _exit(3);
        static char data[200000];
        ssize_t w = write(fds[1], data, sizeof data);
        pthread_join(t, NULL);
        _exit(w == 65536 ? 0 : w < 0 ? 2 : 1);
    }
    close(fds[1]);
    int status;
    CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the interrupted write returned %s (status %#x)",
          WIFEXITED(status) && WEXITSTATUS(status) == 2 ? "an error" : "another count", status);
    int queued = 0;
    ioctl(fds[0], FIONREAD, &queued);
    CHECK(queued == 65536, "%d bytes in the pipe", queued);
    close(fds[0]);
}

// poll and select on a pipe wake when a writer makes it readable, not at their timeout.
static void test_poll_and_select_wake_on_a_pipe(void) {
    int fds[2];
    CHECK(pipe2(fds, 0) == 0, "pipe2: %s", strerror(errno));
    pid_t pid = spawn();
    if (pid == 0) {
        close(fds[0]);
        sleep_ms(50);
        write(fds[1], "p", 1);
        sleep_ms(50);
        write(fds[1], "s", 1);
        _exit(0);
    }
    close(fds[1]);
    int64_t t0 = now_ns();
    struct pollfd pfd = {fds[0], POLLIN, 0};
    int r = poll(&pfd, 1, 5000);
    CHECK(r == 1 && (pfd.revents & POLLIN), "poll: %d, revents %#x", r, pfd.revents);
    char c;
    CHECK(read(fds[0], &c, 1) == 1 && c == 'p', "read after poll");
    fd_set rd;
    FD_ZERO(&rd);
    FD_SET(fds[0], &rd);
    struct timeval tv = {5, 0};
    r = select(fds[0] + 1, &rd, NULL, NULL, &tv);
    CHECK(r == 1 && FD_ISSET(fds[0], &rd), "select: %d", r);
    CHECK(read(fds[0], &c, 1) == 1 && c == 's', "read after select");
    CHECK(now_ns() - t0 < 3000000000LL, "woken by the timeout, not the writes: %lld ms",
          (long long)((now_ns() - t0) / 1000000));
    close(fds[0]);
    int status;
    CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
}

// ---- vfork and execve --------------------------------------------------------------------------

static void test_vfork_execve(void) {
    int fds[2];
    CHECK(pipe2(fds, 0) == 0, "pipe2");
    pid_t pid = vfork();
    if (pid == 0) {
        char fd[16];
        snprintf(fd, sizeof fd, "%d", fds[1]);
        char *argv[] = {"exec-child", "hello", fd, NULL};
        char *envp[] = {"WHO=child", NULL};
        execve(self_path, argv, envp);
        _exit(127);
    }
    close(fds[1]);
    CHECK(pid > 0, "vfork: %s", strerror(errno));
    char buf[64] = {0};
    ssize_t n = read(fds[0], buf, sizeof buf - 1);
    close(fds[0]);
    int status;
    CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 42, "status %#x", status);
    CHECK(n > 0 && strcmp(buf, "hello child") == 0, "the new program wrote <%s>", buf);
}

static void test_execve_errors(void) {
    pid_t pid = spawn();
    if (pid == 0) {
        int bits = 0;
        char *argv[] = {"x", NULL};
        errno = 0;
        bits |= (execve("/no-such-program", argv, NULL) == -1 && errno == ENOENT) << 0;
        bits |= (execve("", argv, NULL) == -1 && errno == ENOENT) << 1;
        bits |= (syscall(SYS_execve, self_path, 8L, 0L) == -1 && errno == EFAULT) << 2;
        size_t big = 200 << 10;
        char *huge = malloc(big);
        memset(huge, 'a', big - 1);
        huge[big - 1] = 0;
        char *long_argv[] = {"x", huge, NULL};
        bits |= (execve(self_path, long_argv, NULL) == -1 && errno == E2BIG) << 3;
        _exit(bits);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status), "waitpid");
    CHECK(WEXITSTATUS(status) == 15, "errno checks passed: bits %#x of 0xf", WEXITSTATUS(status));
}

// ---- the benchmark -----------------------------------------------------------------------------

struct mm_stats {
    uint64_t tlbi[8], promotions, demotions, page_faults, folds, unfolds, data_frames, table_frames, free_frames;
};
static uint64_t tlbis(const struct mm_stats *s) {
    uint64_t n = 0;
    for (int i = 0; i < 8; i++) n += s->tlbi[i];
    return n;
}

// blocks: 2 MiB blocks (the kernel's large faults), else 4 KiB pages (MADV_NOHUGEPAGE). With
// child_writes the child writes every page before it exits: each write is a copy.
static void bench(int blocks, int child_writes) {
    size_t len = 64 << 20;
    char *a = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (!blocks) madvise(a, len, MADV_NOHUGEPAGE);
    for (size_t i = 0; i < len; i += 4096) a[i] = 1;
    struct mm_stats s0, s1, s2;
    int have_stats = syscall(1002, &s0, sizeof s0) == (long)sizeof s0;
    for (int round = 0; round < 5; round++) {
        syscall(1002, &s0, sizeof s0);
        int64_t t0 = now_ns();
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            if (child_writes)
                for (size_t i = 0; i < len; i += 4096) a[i] = 3;
            _exit(0);
        }
        int64_t t1 = now_ns();
        waitpid(pid, NULL, 0);
        int64_t t2 = now_ns();
        syscall(1002, &s1, sizeof s1);
        // One write per page of the parent after the fork: the copy-on-write faults (the child is
        // gone, so each is a reuse: a permission change).
        int64_t t3 = now_ns();
        for (size_t i = 0; i < len; i += 4096) a[i] = 2;
        int64_t t4 = now_ns();
        syscall(1002, &s2, sizeof s2);
        printf("fork-bench: 64 MiB touched, %s%s: fork %ld us, exit+wait %ld us, TLBIs %lu (fork to reap), "
               "then 16384 writes %ld us, %lu faults, TLBIs %lu\n",
               blocks ? "2 MiB blocks" : "4 KiB pages", child_writes ? ", the child writes every page" : "",
               (long)(t1 - t0) / 1000, (long)(t2 - t1) / 1000, have_stats ? (unsigned long)(tlbis(&s1) - tlbis(&s0)) : 0,
               (long)(t4 - t3) / 1000, have_stats ? (unsigned long)(s2.page_faults - s1.page_faults) : 0,
               have_stats ? (unsigned long)(tlbis(&s2) - tlbis(&s1)) : 0);
    }
    munmap(a, len);
}

// getrusage and wait4 count minor page faults: touching fresh anonymous pages adds to
// RUSAGE_SELF and RUSAGE_THREAD, a child's faults reach wait4's rusage and, once it is reaped,
// RUSAGE_CHILDREN (with its CPU time).
static void test_rusage_counts_faults(void) {
    struct rusage self0, self1, thread1, children0, children1, waited;
    CHECK_SYS(getrusage(RUSAGE_SELF, &self0));
    CHECK_SYS(getrusage(RUSAGE_CHILDREN, &children0));
    size_t len = 64 * 4096;
    char *a = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(a != MAP_FAILED, "mmap");
    for (size_t i = 0; i < len; i += 4096) a[i] = 1;
    CHECK_SYS(getrusage(RUSAGE_SELF, &self1));
    CHECK_SYS(getrusage(RUSAGE_THREAD, &thread1));
    CHECK(self1.ru_minflt > self0.ru_minflt, "faults counted: %ld then %ld", self0.ru_minflt, self1.ru_minflt);
    CHECK(thread1.ru_minflt > 0 && thread1.ru_minflt <= self1.ru_minflt, "the thread's: %ld of %ld",
          thread1.ru_minflt, self1.ru_minflt);
    CHECK_ERR(getrusage(7, &self1), EINVAL);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        char *b = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        for (size_t i = 0; i < len; i += 4096) b[i] = 2;
        volatile unsigned long spin = 0;
        for (long i = 0; i < 20000000; i++) spin += i;
        _exit(0);
    }
    int status;
    CHECK(wait4(pid, &status, 0, &waited) == pid, "wait4");
    CHECK(waited.ru_minflt > 0, "the child's faults in wait4's rusage: %ld", waited.ru_minflt);
    CHECK(waited.ru_utime.tv_sec > 0 || waited.ru_utime.tv_usec > 0 || waited.ru_stime.tv_sec > 0
              || waited.ru_stime.tv_usec > 0, "the child's CPU time in wait4's rusage");
    CHECK_SYS(getrusage(RUSAGE_CHILDREN, &children1));
    CHECK(children1.ru_minflt >= children0.ru_minflt + waited.ru_minflt, "RUSAGE_CHILDREN: %ld, then %ld (+%ld)",
          children0.ru_minflt, children1.ru_minflt, waited.ru_minflt);
    munmap(a, len);
}

// The whole of the text file `path` in a static buffer (no stdio, no heap: nothing here may
// touch a new page of the area measured), or "" when it cannot be read.
static const char *read_text(const char *path) {
    static char text[1 << 16];
    size_t len = 0;
    ssize_t n;
    int fd = open(path, O_RDONLY);
    while (fd >= 0 && len < sizeof text - 1 && (n = read(fd, text + len, sizeof text - 1 - len)) > 0) len += n;
    if (fd >= 0) close(fd);
    text[len] = 0;
    return text;
}

// The number after `key` (a "Key: N kB" line) in `text` from `from` on, or -1.
static long kb_after(const char *from, const char *key) {
    const char *at = from ? strstr(from, key) : NULL;
    return at ? strtol(at + strlen(key), NULL, 10) : -1;
}

// The Rss of the area that starts at `start`, from /proc/self/smaps (kB), or -1: the area alone,
// since the program's own text and data fault in as it runs (and fault-around maps several
// pages at a time), on Linux too.
static long area_rss_kb(const volatile void *start) {
    const char *text = read_text("/proc/self/smaps");
    char key[32];
    snprintf(key, sizeof key, "\n%08lx-", (unsigned long)start);
    return kb_after(strstr(text, key), "\nRss:");
}

// Reading private anonymous memory never written maps the shared zero page: 64 MiB read hold
// no memory (the area's Rss stays 0: smaps does not count the zero page; MemFree falls by the
// page tables only), the first write to a page takes exactly one page, and a forked child reads
// zeros too and its write leaves the parent's page zero.
static void test_zero_page_reads_hold_no_frames(void) {
    long page = sysconf(_SC_PAGESIZE);
    size_t len = 64UL << 20;
    volatile char *a = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(a != MAP_FAILED, "mmap");
    long free0 = kb_after(read_text("/proc/meminfo"), "MemFree:");
    unsigned long sum = 0;
    for (size_t i = 0; i < len; i += page) sum += a[i];
    long free1 = kb_after(read_text("/proc/meminfo"), "MemFree:");
    long rss1 = area_rss_kb(a);
    CHECK(sum == 0, "untouched memory reads zero");
    CHECK(rss1 == 0, "Rss of 64 MiB read and never written: %ld kB", rss1);
    CHECK(free0 > 0 && free0 - free1 < 8192, "MemFree fell by %ld kB reading 64 MiB", free0 - free1);
    a[len / 2 + 7] = 1;
    long rss2 = area_rss_kb(a);
    CHECK(rss2 == page / 1024, "one page written: Rss %ld kB", rss2);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        int bad = a[len / 4] != 0 || a[len / 2 + 7] != 1;
        a[len / 4] = 2;
        _exit(bad);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "the child reads zeros and the parent's write");
    CHECK(a[len / 4] == 0, "the child's write stays the child's");
    munmap((void *)a, len);
}

static const struct test_case tests[] = {
    {"fork_isolates_memory", test_fork_isolates_memory},
    {"wait_statuses", test_wait_statuses},
    {"kill_reaches_other_processes", test_kill_reaches_other_processes},
    {"many_children_and_sigchld", test_many_children_and_sigchld},
    {"ignored_sigchld_leaves_no_zombie", test_ignored_sigchld_leaves_no_zombie},
    {"fork_from_threads", test_fork_from_threads},
    {"dontfork_wipeonfork_shared", test_dontfork_wipeonfork_shared},
    {"truncate_races_fork", test_truncate_races_fork},
    {"pipe_between_processes", test_pipe_between_processes},
    {"pipe_edges", test_pipe_edges},
    {"pipe_blocking_write_is_whole", test_pipe_blocking_write_is_whole},
    {"pipe_small_writes_are_atomic", test_pipe_small_writes_are_atomic},
    {"pipe_nonblocking_writes", test_pipe_nonblocking_writes},
    {"pipe_write_interrupted_returns_count", test_pipe_write_interrupted_returns_count},
    {"poll_and_select_wake_on_a_pipe", test_poll_and_select_wake_on_a_pipe},
    {"vfork_execve", test_vfork_execve},
    {"execve_errors", test_execve_errors},
    {"rusage_counts_faults", test_rusage_counts_faults},
    {"zero_page_reads_hold_no_frames", test_zero_page_reads_hold_no_frames},
};

int main(int argc, char **argv) {
    if (argc >= 3 && strcmp(argv[0], "exec-child") == 0) {
        // Started by test_vfork_execve: writes "hello child" into the pipe it was given.
        const char *who = getenv("WHO");
        char out[64];
        int n = snprintf(out, sizeof out, "%s %s", argv[1], who ? who : "?");
        write(atoi(argv[2]), out, n + 1);
        return 42;
    }
    if (argc > 1 && strcmp(argv[1], "measure") == 0) {
        bench(1, 0);
        bench(0, 0);
        bench(0, 1);
        return 0;
    }
    if (argv[0][0] == '/') self_path = argv[0];
    int passed = 0, failed = 0;
    return run_cases(tests, sizeof tests / sizeof tests[0], argc, argv, passed, failed);
}
