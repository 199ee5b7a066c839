/* A dynamically linked glibc program: the kernel loads it and its interpreter (PT_INTERP,
 * ld-linux-aarch64.so.1), which maps libc.so.6 from the file tree; then it opens a second library
 * itself (dlopen of libm.so.6: the loader's reservation, MAP_FIXED maps of the file at offsets,
 * mprotect for RELRO). Each line is what Linux 6.1 prints for the same files. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stdio.h>
#include <string.h>
#include <sys/auxv.h>

static int count_objects(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    int *n = data;
    /* Libraries from files: the vDSO (linux-vdso.so.1) is the kernel's, counted elsewhere. */
    if (info->dlpi_name && strstr(info->dlpi_name, ".so") && !strstr(info->dlpi_name, "vdso"))
        (*n)++;
    return 0;
}

int main(int argc, char **argv) {
    printf("hello from a dynamically linked glibc program (%s)\n", argv[0]);
    unsigned long base = getauxval(AT_BASE), entry = getauxval(AT_ENTRY);
    printf("AT_BASE %s, AT_ENTRY %s\n", base ? "set" : "0", entry ? "set" : "0");
    const char *execfn = (const char *)getauxval(AT_EXECFN);
    printf("AT_EXECFN %s\n", execfn ? execfn : "(none)");
    Dl_info info;
    if (dladdr((void *)printf, &info) && info.dli_fname)
        printf("printf is in %s\n", strrchr(info.dli_fname, '/') ? strrchr(info.dli_fname, '/') + 1 : info.dli_fname);
    void *m = dlopen("libm.so.6", RTLD_NOW);
    if (!m) {
        printf("dlopen(libm.so.6) failed: %s\n", dlerror());
        return 1;
    }
    double (*cosine)(double) = (double (*)(double))dlsym(m, "cos");
    printf("cos(0) through dlopen: %.1f\n", cosine ? cosine(0.0) : -1.0);
    int objects = 0;
    dl_iterate_phdr(count_objects, &objects);
    printf("shared libraries loaded from files: %d\n", objects);
    if (argc > 1 && strcmp(argv[1], "maps") == 0) {
        /* Where the kernel and the loader put everything (not compared with Linux: its
         * addresses are random). */
        FILE *f = fopen("/proc/self/maps", "r");
        char line[512];
        while (f && fgets(line, sizeof line, f))
            fputs(line, stdout);
    }
    dlclose(m);
    return 0;
}
