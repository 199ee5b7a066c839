// hardening-test: arm64's pointer authentication as a program sees it (built with
// -mbranch-protection=standard, so its functions sign their return addresses with PACIASP and
// check them with AUTIASP). What it checks, and prints, is what Linux 6.1 does on the same CPU:
//   - the auxiliary vector says HWCAP_PACA and HWCAP_PACG;
//   - prctl(PR_PAC_GET_ENABLED_KEYS) starts with all four address keys, and
//     PR_PAC_SET_ENABLED_KEYS turns one off and on again;
//   - the generic key (PACGA) is the same in a forked child, differs after PR_PAC_RESET_KEYS,
//     and differs in a program started by execve (new keys at exec);
//   - a return address overwritten on the stack is caught: the process dies of the signal Linux
//     sends (its si_code printed), and with the instruction A key disabled the same overwrite goes
//     unnoticed (the function "returns" to the planted address);
//   - a BTI-marked program (bti-test, tests/programs/bti.c) runs with its code in guarded pages:
//     an indirect call to a landing pad works, a branch past one kills it with SIGILL;
//   - prctl(PR_SET_MDWE) (Linux 6.3, so not in the comparison with 6.1: run it by name) refuses
//     writable-and-executable memory and making memory executable, cannot be undone, and is kept
//     by fork and execve;
//   - personality(READ_IMPLIES_EXEC), what `setarch -X` sets, is kept by fork and execve, and a
//     process with it maps writable-and-executable memory and runs code written there (Linux
//     always allows that; this kernel only with the flag: run it by name);
//   - mseal (Linux 6.10, not in the comparison either) refuses its bad arguments and a range with
//     a hole, and then every change of a sealed mapping with EPERM, as Linux's own mseal_test.c
//     expects: munmap, mremap, MAP_FIXED, mprotect (the areas before a sealed one change), and
//     discarding advice on read-only private memory (the page keeps its contents); a forked child
//     keeps the seal, and /proc/self/smaps shows it ("sl").
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/prctl.h>

#include "check.h"

#ifndef HWCAP_PACA
#define HWCAP_PACA (1UL << 30)
#define HWCAP_PACG (1UL << 31)
#endif
#ifndef PR_PAC_RESET_KEYS
#define PR_PAC_RESET_KEYS 54
#endif
#ifndef PR_PAC_SET_ENABLED_KEYS
#define PR_PAC_SET_ENABLED_KEYS 60
#define PR_PAC_GET_ENABLED_KEYS 61
#endif
#define PR_PAC_APIAKEY (1UL << 0)
#define PR_PAC_APGAKEY (1UL << 4)

static uint64_t pacga(uint64_t a, uint64_t b) {
    uint64_t r;
    __asm__ volatile(".arch_extension pauth\n pacga %0, %1, %2" : "=r"(r) : "r"(a), "r"(b));
    return r;
}

static void test_hwcaps(void) {
    unsigned long caps = getauxval(AT_HWCAP);
    CHECK(caps & HWCAP_PACA, "no HWCAP_PACA: %#lx", caps);
    CHECK(caps & HWCAP_PACG, "no HWCAP_PACG: %#lx", caps);
}

static void test_enabled_keys(void) {
    CHECK(prctl(PR_PAC_GET_ENABLED_KEYS, 0, 0, 0, 0) == 15, "enabled keys at start: %d",
          prctl(PR_PAC_GET_ENABLED_KEYS, 0, 0, 0, 0));
    CHECK_SYS(prctl(PR_PAC_SET_ENABLED_KEYS, PR_PAC_APIAKEY, 0, 0, 0));
    CHECK(prctl(PR_PAC_GET_ENABLED_KEYS, 0, 0, 0, 0) == 14, "IA disabled");
    CHECK_SYS(prctl(PR_PAC_SET_ENABLED_KEYS, PR_PAC_APIAKEY, PR_PAC_APIAKEY, 0, 0));
    CHECK(prctl(PR_PAC_GET_ENABLED_KEYS, 0, 0, 0, 0) == 15, "IA enabled again");
    CHECK_ERR(prctl(PR_PAC_SET_ENABLED_KEYS, PR_PAC_APGAKEY, 0, 0, 0), EINVAL);
    CHECK_ERR(prctl(PR_PAC_SET_ENABLED_KEYS, 0, PR_PAC_APIAKEY, 0, 0), EINVAL);
    CHECK_ERR(prctl(PR_PAC_GET_ENABLED_KEYS, 1, 0, 0, 0), EINVAL);
    CHECK_ERR(prctl(PR_PAC_RESET_KEYS, 1 << 5, 0, 0, 0), EINVAL);
    CHECK_ERR(prctl(PR_PAC_RESET_KEYS, 0, 1, 0, 0), EINVAL);
}

static void test_generic_key(void) {
    uint64_t mine = pacga(0x1234, 0x5678);
    int fds[2];
    CHECK_SYS(pipe(fds));
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        uint64_t v = pacga(0x1234, 0x5678);
        _exit(write(fds[1], &v, sizeof v) == sizeof v ? 0 : 1);
    }
    uint64_t child = 0;
    CHECK(read(fds[0], &child, sizeof child) == sizeof child, "read");
    waitpid(pid, NULL, 0);
    CHECK(child == mine, "a forked child has the same keys: %#lx vs %#lx", (unsigned long)child, (unsigned long)mine);
    CHECK_SYS(prctl(PR_PAC_RESET_KEYS, PR_PAC_APGAKEY, 0, 0, 0));
    CHECK(pacga(0x1234, 0x5678) != mine, "PR_PAC_RESET_KEYS gives a new generic key");
    // A program started by execve has keys of its own: this program, asked for its value.
    fflush(stdout);
    pid = fork();
    if (pid == 0) {
        dup2(fds[1], 1);
        execl("/proc/self/exe", "hardening-test", "--pacga", (char *)NULL);
        _exit(127);
    }
    CHECK(read(fds[0], &child, sizeof child) == sizeof child, "read after exec");
    int status;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "exec status %#x", status);
    CHECK(child != pacga(0x1234, 0x5678), "execve gives new keys");
    close(fds[0]);
    close(fds[1]);
}

static volatile int landed;

// Where the overwritten return address points: a plain function, so that an unchecked return
// lands on valid code and says so.
__attribute__((noinline)) static void landing(void) {
    landed = 1;
    printf("    returned to the planted address\n");
    fflush(stdout);
    _exit(42);
}

// Signs its return address on entry (PACIASP, from -mbranch-protection) and overwrites the saved
// copy in its frame record with landing's address, unsigned.
__attribute__((noinline)) static void overwrite_return_address(void) {
    void **frame = __builtin_frame_address(0);
    __asm__ volatile("" ::: "memory");
    frame[1] = (void *)landing;
    __asm__ volatile("" ::: "memory");
}

static void on_fault(int sig, siginfo_t *si, void *ctx) {
    (void)ctx;
    printf("    %s, si_code %d\n", sig == SIGILL ? "SIGILL" : sig == SIGSEGV ? "SIGSEGV" : "another signal", si->si_code);
    fflush(stdout);
    _exit(100 + sig);
}

static int overwrite_in_child(int disable_ia) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        struct sigaction sa = {.sa_sigaction = on_fault, .sa_flags = SA_SIGINFO};
        sigaction(SIGILL, &sa, NULL);
        sigaction(SIGSEGV, &sa, NULL);
        if (disable_ia && prctl(PR_PAC_SET_ENABLED_KEYS, PR_PAC_APIAKEY, 0, 0, 0) != 0) _exit(2);
        overwrite_return_address();
        _exit(1);
    }
    int status;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void test_overwritten_return_address(void) {
    int code = overwrite_in_child(0);
    CHECK(code == 100 + SIGILL || code == 100 + SIGSEGV, "the overwrite was not caught (exit %d)", code);
    printf("    caught: %s\n", code == 100 + SIGILL ? "SIGILL" : "SIGSEGV");
}

static void test_overwrite_with_the_key_off(void) {
    int code = overwrite_in_child(1);
    CHECK(code == 42, "with IA disabled the overwrite goes unnoticed (exit %d)", code);
}

// Runs /bti-test with `arg`; its output goes to ours. Returns its wait status.
static int run_bti(const char *arg) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        execl("/bti-test", "bti-test", arg, (char *)NULL);
        _exit(127);
    }
    int status;
    waitpid(pid, &status, 0);
    return status;
}

static void test_bti_landing_pad(void) {
    int status = run_bti("direct");
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %#x", status);
}

static void test_bti_branch_past_the_landing_pad(void) {
    int status = run_bti("past");
    CHECK(WIFSIGNALED(status), "not killed: status %#x", status);
    printf("    killed by %s\n", WTERMSIG(status) == SIGILL ? "SIGILL" : strsignal(WTERMSIG(status)));
}

#ifndef PR_SET_MDWE
#define PR_SET_MDWE 65
#define PR_GET_MDWE 66
#define PR_MDWE_REFUSE_EXEC_GAIN 1
#endif

// MDWE's rules, in a child that then execs itself to report whether execve kept them (a
// failed check ends the child with status 1).
static void mdwe_child(void) {
    {
        CHECK_ERR(prctl(PR_SET_MDWE, 2, 0, 0, 0), EINVAL);
        CHECK_ERR(prctl(PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN, 1, 0, 0), EINVAL);
        CHECK(prctl(PR_GET_MDWE, 0, 0, 0, 0) == 0, "off to start");
        CHECK_SYS(prctl(PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN, 0, 0, 0));
        CHECK(prctl(PR_GET_MDWE, 0, 0, 0, 0) == PR_MDWE_REFUSE_EXEC_GAIN, "on");
        CHECK_ERR(prctl(PR_SET_MDWE, 0, 0, 0, 0), EPERM);
        long page = sysconf(_SC_PAGESIZE);
        char *rw = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        CHECK(rw != MAP_FAILED, "mmap RW");
        CHECK_ERR(mprotect(rw, page, PROT_READ | PROT_EXEC), EACCES);
        CHECK(mmap(NULL, page, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) == MAP_FAILED
                  && errno == EACCES, "mmap RWX");
        char *rx = mmap(NULL, page, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        CHECK(rx != MAP_FAILED, "a new executable mapping is allowed");
        CHECK_SYS(mprotect(rx, page, PROT_READ));
        CHECK_ERR(mprotect(rx, page, PROT_READ | PROT_EXEC), EACCES);
        fflush(stdout);
        pid_t grandchild = fork();
        if (grandchild == 0) _exit(prctl(PR_GET_MDWE, 0, 0, 0, 0) == PR_MDWE_REFUSE_EXEC_GAIN ? 0 : 1);
        int status;
        waitpid(grandchild, &status, 0);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "fork keeps it: %#x", status);
        execl("/proc/self/exe", "hardening-test", "--mdwe", (char *)NULL);
        _exit(127);
    }
}

// Linux 6.3's prctl(PR_SET_MDWE) (Debian's 6.1 has none: this case is not in the parity run).
static void test_mdwe(void) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        mdwe_child();
        _exit(1);
    }
    int status;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == PR_MDWE_REFUSE_EXEC_GAIN, "execve keeps it: status %#x", status);
}

#ifndef READ_IMPLIES_EXEC
#define READ_IMPLIES_EXEC 0x0400000
#endif

// Maps a page writable and executable, writes `mov w0, #42; ret` into it and calls it: 42, or
// 1 when the mapping is refused.
static int run_written_code(void) {
    long page = sysconf(_SC_PAGESIZE);
    uint32_t *code = mmap(NULL, page, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (code == MAP_FAILED) return 1;
    code[0] = 0x52800540; // mov w0, #42
    code[1] = 0xd65f03c0; // ret
    __builtin___clear_cache((char *)code, (char *)(code + 2));
    return ((int (*)(void))code)();
}

// The personality flag set in a child, seen by its own forked child and, after execve, by the
// program it runs (main's --read-implies-exec: the flag still set and written code runs).
static void test_read_implies_exec(void) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        CHECK(personality(0xffffffff) >= 0, "query");
        CHECK_SYS(personality(READ_IMPLIES_EXEC));
        CHECK((personality(0xffffffff) & READ_IMPLIES_EXEC) != 0, "set");
        CHECK(run_written_code() == 42, "RWX code runs");
        fflush(stdout);
        pid_t grandchild = fork();
        if (grandchild == 0) _exit((personality(0xffffffff) & READ_IMPLIES_EXEC) ? run_written_code() : 1);
        int status;
        waitpid(grandchild, &status, 0);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 42, "fork keeps it: %#x", status);
        execl("/proc/self/exe", "hardening-test", "--read-implies-exec", (char *)NULL);
        _exit(127);
    }
    int status;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 42, "execve keeps it: status %#x", status);
}

#ifndef SYS_mseal
#define SYS_mseal 462
#endif

static long sys_mseal(void *addr, size_t len, unsigned long flags) {
    return syscall(SYS_mseal, addr, len, flags);
}

// Whether the smaps entry of the area at `addr` has "sl" in its VmFlags.
static int smaps_sealed(void *addr) {
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f) return -1;
    char line[512];
    int in = 0, sealed = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long s, e;
        if (sscanf(line, "%lx-%lx ", &s, &e) == 2) {
            in = (uintptr_t)addr >= s && (uintptr_t)addr < e;
        } else if (in && strncmp(line, "VmFlags:", 8) == 0) {
            sealed = strstr(line, " sl") != NULL;
        }
    }
    fclose(f);
    return sealed;
}

// Linux 6.10's mseal (Debian's 6.1 has none: this case is not in the parity run).
static void test_mseal(void) {
    long page = sysconf(_SC_PAGESIZE);
    char *p = mmap(NULL, 4 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(p != MAP_FAILED, "mmap");
    memset(p, 0x5a, 4 * page);
    CHECK_ERR(sys_mseal(p, page, 1), EINVAL);
    CHECK_ERR(sys_mseal(p + 1, page, 0), EINVAL);
    CHECK_SYS(munmap(p + 2 * page, page));
    CHECK_ERR(sys_mseal(p, 4 * page, 0), ENOMEM);
    // The failed call sealed nothing: the first page can still be changed.
    CHECK_SYS(mprotect(p, page, PROT_READ));
    CHECK_SYS(mprotect(p, page, PROT_READ | PROT_WRITE));
    CHECK_SYS(sys_mseal(p, 0, 0));
    // Seal page 1 (read-only) and page 0 (writable).
    CHECK_SYS(mprotect(p + page, page, PROT_READ));
    CHECK_SYS(sys_mseal(p, 2 * page, 0));
    CHECK_SYS(sys_mseal(p, 2 * page, 0));
    CHECK(smaps_sealed(p) == 1 && smaps_sealed(p + 3 * page) == 0, "smaps VmFlags sl: %d %d",
          smaps_sealed(p), smaps_sealed(p + 3 * page));
    CHECK_ERR(munmap(p, page), EPERM);
    CHECK_ERR(munmap(p + page, 3 * page), EPERM);
    CHECK(p[0] == 0x5a && p[3 * page] == 0x5a, "nothing unmapped");
    CHECK(mmap(p, page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED && errno == EPERM,
          "MAP_FIXED over a sealed page");
    CHECK(mremap(p, page, 2 * page, MREMAP_MAYMOVE) == MAP_FAILED && errno == EPERM, "mremap grow");
    CHECK(mremap(p, 2 * page, page, 0) == MAP_FAILED && errno == EPERM, "mremap shrink");
    CHECK(mremap(p + 3 * page, page, page, MREMAP_MAYMOVE | MREMAP_FIXED, p) == MAP_FAILED && errno == EPERM,
          "mremap onto a sealed page");
    CHECK_ERR(mprotect(p, page, PROT_READ | PROT_WRITE), EPERM);
    CHECK_ERR(mprotect(p, page, PROT_READ), EPERM);
    // Discarding advice: allowed on the writable sealed page, refused on the read-only one.
    CHECK_SYS(madvise(p, page, MADV_DONTNEED));
    CHECK(p[0] == 0, "the writable page was discarded");
    CHECK_ERR(madvise(p + page, page, MADV_DONTNEED), EPERM);
    CHECK(p[page] == 0x5a, "the read-only page kept its contents");
    CHECK_SYS(madvise(p + page, page, MADV_WILLNEED));
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) _exit(munmap(p, page) == -1 && errno == EPERM ? 0 : 1);
    int status;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "fork keeps the seal: %#x", status);
    // mprotect over an unsealed area then a sealed one: the first changes, then EPERM.
    char *q = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(q != MAP_FAILED, "mmap 2");
    CHECK_SYS(sys_mseal(q + page, page, 0));
    CHECK_ERR(mprotect(q, 2 * page, PROT_READ), EPERM);
    CHECK(smaps_sealed(q) == 0 && smaps_sealed(q + page) == 1, "two areas");
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "--mdwe") == 0) return prctl(PR_GET_MDWE, 0, 0, 0, 0);
    if (argc == 2 && strcmp(argv[1], "--read-implies-exec") == 0)
        return (personality(0xffffffff) & READ_IMPLIES_EXEC) ? run_written_code() : 1;
    if (argc == 2 && strcmp(argv[1], "--pacga") == 0) {
        uint64_t v = pacga(0x1234, 0x5678);
        return write(1, &v, sizeof v) == sizeof v ? 0 : 1;
    }
    static const struct test_case tests[] = {
        {"pac_hwcaps", test_hwcaps},
        {"pac_enabled_keys", test_enabled_keys},
        {"pac_generic_key", test_generic_key},
        {"pac_overwritten_return_address", test_overwritten_return_address},
        {"pac_overwrite_with_the_key_off", test_overwrite_with_the_key_off},
        {"bti_landing_pad", test_bti_landing_pad},
        {"bti_branch_past_the_landing_pad", test_bti_branch_past_the_landing_pad},
        {"mdwe", test_mdwe},
        {"mseal", test_mseal},
        {"read_implies_exec", test_read_implies_exec},
    };
    setvbuf(stdout, NULL, _IOLBF, 0);
    return run_cases(tests, sizeof tests / sizeof tests[0], argc, argv, 0, 0);
}
