// bti-test: a program marked for BTI (GNU_PROPERTY_AARCH64_FEATURE_1_BTI, from
// -mbranch-protection=standard; freestanding, so no unmarked C library is linked in) whose
// executable pages the kernel must map guarded. It calls a function through a pointer (its
// first instruction is a landing pad: fine), then branches through a pointer to the second
// instruction of the same function, which is no landing pad: on a CPU with BTI the process dies
// of SIGILL there, as on Linux. With the argument "direct" it does only the first part.
static long syscall3(long n, long a, long b, long c) {
    register long x8 __asm__("x8") = n;
    register long x0 __asm__("x0") = a;
    register long x1 __asm__("x1") = b;
    register long x2 __asm__("x2") = c;
    __asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2) : "memory");
    return x0;
}

static void say(const char *s) {
    long n = 0;
    while (s[n]) n++;
    syscall3(64, 1, (long)s, n);
}

__attribute__((noinline)) void landing_pad(void) {
    say("bti: an indirect call to a landing pad returns\n");
}

void (*volatile target)(void) = landing_pad;

__attribute__((noreturn)) void start_c(long *sp) {
    long argc = sp[0];
    char **argv = (char **)(sp + 1);
    target();
    if (argc > 1 && argv[1][0] == 'd') syscall3(94, 0, 0, 0);
    say("bti: branching past the landing pad\n");
    void (*past)(void) = (void (*)(void))((char *)target + 4);
    past();
    say("bti: the branch past the landing pad was not stopped\n");
    syscall3(94, 1, 0, 0);
    __builtin_unreachable();
}

__asm__(".globl _start\n"
        "_start:\n"
        "    mov x0, sp\n"
        "    b start_c\n");
