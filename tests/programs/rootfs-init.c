/* rootfs-init: the first process of a Linux reference run with a root file system image
 * (scripts/rootfs --linux). Linux starts an initramfs's init with nothing mounted, while the
 * programs of the images expect what a booted system has and this kernel provides itself: /proc
 * (Racket finds its own executable through /proc/self/exe), /sys and /dev. rootfs-init mounts
 * proc, sysfs and devtmpfs there, then becomes parity-init with the same arguments, which runs
 * the command as its child, prints "parity: exit N" and powers off. */
#include <stdio.h>
#include <sys/mount.h>
#include <unistd.h>

int main(int argc, char **argv) {
    (void)argc;
    if (mount("proc", "/proc", "proc", 0, NULL) != 0) perror("rootfs-init: mount /proc");
    if (mount("sysfs", "/sys", "sysfs", 0, NULL) != 0) perror("rootfs-init: mount /sys");
    if (mount("devtmpfs", "/dev", "devtmpfs", 0, NULL) != 0) perror("rootfs-init: mount /dev");
    argv[0] = "/parity-init";
    execv("/parity-init", argv);
    perror("rootfs-init: execv /parity-init");
    return 127;
}
