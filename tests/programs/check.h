/* check.h: the small test harness of the repository's C test programs (abi-test.c, fork.c).
 *
 * A case is a `void f(void)` whose CHECK(cond, fmt, ...) lines print why and end the case when
 * `cond` is false. run_case() prints "ok - NAME" or "FAIL - NAME" for it; run_cases() runs the
 * cases named on the command line (all of them with no arguments) and prints the
 * "N passed, N failed" line that scripts/test counts. run_cases_apart() does the same with each
 * case in a child process of its own. CHECK_SYS and CHECK_ERR check a system call's result and
 * errno (strerrorname_np: the including file defines _GNU_SOURCE). */
#ifndef CHECK_H
#define CHECK_H
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int failed_here;
#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            printf("    check failed (line %d): %s: ", __LINE__, #cond);                           \
            printf(__VA_ARGS__);                                                                   \
            printf("\n");                                                                          \
            failed_here = 1;                                                                       \
            return;                                                                                \
        }                                                                                          \
    } while (0)

/* CHECK_SYS(expr): a system call that must succeed (not -1); says its errno's name otherwise.
 * CHECK_ERR(expr, E): one that must fail with errno E; says what it returned otherwise. */
#define CHECK_SYS(expr)                                                                            \
    do {                                                                                           \
        long r_ = (long)(expr);                                                                    \
        CHECK(r_ != -1, "failed with %s", strerrorname_np(errno));                                  \
    } while (0)
#define CHECK_ERR(expr, E)                                                                         \
    do {                                                                                           \
        errno = 0;                                                                                 \
        long r_ = (long)(expr);                                                                    \
        int e_ = errno;                                                                            \
        CHECK(r_ == -1 && e_ == (E), "returned %ld, errno %s (want %s)", r_,                        \
              e_ ? strerrorname_np(e_) : "0", strerrorname_np(E));                                 \
    } while (0)

struct test_case {
    const char *name;
    void (*run)(void);
};

/* Records the outcome of the case just run (failed_here), printing its line. */
static void case_done(const char *name, int *passed, int *failed) {
    printf("%s - %s\n", failed_here ? "FAIL" : "ok", name);
    failed_here ? (*failed)++ : (*passed)++;
    failed_here = 0;
}

/* Runs the cases argv[1..] names (every case when argc is 1), prints the summary line and
 * returns the exit status: 0 when nothing failed. `passed` and `failed` may carry earlier cases. */
static inline int run_cases(const struct test_case *cases, unsigned n, int argc, char **argv, int passed, int failed) {
    for (unsigned i = 0; i < n; i++) {
        int wanted = argc == 1;
        for (int a = 1; a < argc; a++) wanted |= strcmp(argv[a], cases[i].name) == 0;
        if (!wanted) continue;
        failed_here = 0;
        cases[i].run();
        case_done(cases[i].name, &passed, &failed);
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
/* run_cases_apart: run_cases with each case in a child process of its own (and its own process
 * group), so a case that crashes, hangs or leaves state behind (descriptors, signal dispositions,
 * limits, timers, the working directory, processes) cannot disturb the next. A child that dies of
 * a signal is a FAIL with the signal said; one still running after `seconds` is killed with its
 * process group and is a FAIL. The guard is this process's (polling wait4 between nanosleeps),
 * not an alarm in the child, so it holds on a kernel without timers and leaves the case's
 * ITIMER_REAL alone. Whatever a case left in its process group is killed after it. */
static inline int run_cases_apart(const struct test_case *cases, unsigned n, int argc, char **argv, unsigned seconds) {
    int passed = 0, failed = 0;
    for (unsigned i = 0; i < n; i++) {
        int wanted = argc == 1;
        for (int a = 1; a < argc; a++) wanted |= strcmp(argv[a], cases[i].name) == 0;
        if (!wanted) continue;
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            setpgid(0, 0);
            failed_here = 0;
            cases[i].run();
            fflush(stdout);
            _exit(failed_here ? 1 : 0);
        }
        if (pid > 0) setpgid(pid, pid); /* whichever of the two runs first */
        int status = 0, r = 0;
        struct timespec start, now, nap = {0, 1000000};
        clock_gettime(CLOCK_MONOTONIC, &start);
        while (pid > 0 && (r = waitpid(pid, &status, WNOHANG)) == 0) {
            clock_gettime(CLOCK_MONOTONIC, &now);
            if (now.tv_sec - start.tv_sec >= (time_t)seconds) {
                kill(-pid, SIGKILL);
                kill(pid, SIGKILL);
                r = waitpid(pid, &status, 0);
                break;
            }
            nanosleep(&nap, NULL);
            if (nap.tv_nsec < 50000000) nap.tv_nsec *= 2;
        }
        if (pid > 0) kill(-pid, SIGKILL); /* what the case left running */
        failed_here = 1;
        if (pid < 0) {
            printf("    fork: %s\n", strerror(errno));
        } else if (r != pid) {
            printf("    waitpid: %s\n", strerror(errno));
        } else if (WIFSIGNALED(status)) {
            printf("    the case died of signal %d (%s)\n", WTERMSIG(status), WTERMSIG(status) == SIGKILL ? "killed: timed out?" : strsignal(WTERMSIG(status)));
        } else {
            failed_here = WEXITSTATUS(status) != 0;
        }
        case_done(cases[i].name, &passed, &failed);
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
#endif
