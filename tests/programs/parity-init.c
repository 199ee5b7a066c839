/* parity-init: the init process of the Linux reference runs (scripts/linux-parity).
 *
 * Linux treats pid 1 specially (signals without a handler are not delivered to it, and its exit
 * panics the kernel), so a program under comparison must not be pid 1 there. parity-init runs
 * as pid 1, starts `argv[1]` with the remaining arguments as a child (its argv[0] is its path,
 * as this kernel gives it), waits for it, prints "parity: exit N" (N the exit status, or 128 +
 * the signal that ended it, as a shell reports it) and powers the machine off. */
#include <stdio.h>
#include <sys/reboot.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 2) {
        puts("parity-init: name a program after --");
    } else {
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
