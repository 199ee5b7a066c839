/* parity-init: the init process of the Linux reference runs (scripts/linux-parity).
 *
 * Linux treats pid 1 specially (signals without a handler are not delivered to it, and its exit
 * panics the kernel), so a program under comparison must not be pid 1 there. parity-init runs
 * as pid 1, prepares the file system the program sees, starts `argv[1]` with the remaining
 * arguments as a child (its argv[0] is its path, as this kernel gives it), waits for it, prints
 * "parity: exit N" (N the exit status, or 128 + the signal that ended it, as a shell reports it)
 * and powers the machine off.
 *
 * The file system: this kernel starts every program with proc on /proc, a minimal sysfs on /sys,
 * its devices on /dev and an empty tmpfs on /tmp, while Linux's initramfs root has none of them
 * mounted (only the /dev/console and the empty /root its built-in initramfs leaves). So the
 * reference environment mounts the same four first: proc, sysfs, devtmpfs and tmpfs, creating the
 * directories the initramfs lacks, and removes the empty /root, so that / holds the initramfs's
 * files and those four directories on both kernels. A mount that fails is said on the console and
 * the run goes on (the program's own checks then show what is missing). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static void mount_at(const char *source, const char *dir, const char *type) {
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) printf("parity-init: mkdir %s: %s\n", dir, strerror(errno));
    if (mount(source, dir, type, 0, NULL) != 0) printf("parity-init: mount %s on %s: %s\n", type, dir, strerror(errno));
}

int main(int argc, char **argv) {
    if (argc < 2) {
        puts("parity-init: name a program after --");
    } else {
        mount_at("proc", "/proc", "proc");
        mount_at("sysfs", "/sys", "sysfs");
        mount_at("devtmpfs", "/dev", "devtmpfs");
        mount_at("tmpfs", "/tmp", "tmpfs");
        rmdir("/root");
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            execv(argv[1], argv + 1);
            perror("parity-init: execv");
            _exit(127);
        }
        int status = 0;
        if (pid < 0 || waitpid(pid, &status, 0) != pid) {
            perror("parity-init: fork/waitpid");
        } else {
            int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
            printf("parity: exit %d\n", code);
        }
    }
    fflush(stdout);
    sync();
    reboot(RB_POWER_OFF);
    return 0;
}
