/* check.h: the small test harness of the repository's C test programs (abi-test.c, fork.c).
 *
 * A case is a `void f(void)` whose CHECK(cond, fmt, ...) lines print why and end the case when
 * `cond` is false. run_case() prints "ok - NAME" or "FAIL - NAME" for it; run_cases() runs the
 * cases named on the command line (all of them with no arguments) and prints the
 * "N passed, N failed" line that scripts/test counts. */
#ifndef CHECK_H
#define CHECK_H
#include <stdio.h>
#include <string.h>

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
static int run_cases(const struct test_case *cases, unsigned n, int argc, char **argv, int passed, int failed) {
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
#endif
