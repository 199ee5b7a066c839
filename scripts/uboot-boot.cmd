# U-Boot boot script for a generic board (docs/boards.md). Make boot.scr from it with mkimage from
# Debian's u-boot-tools:
#   mkimage -A arm64 -T script -C none -n kernel -d scripts/uboot-boot.cmd boot.scr
# Put boot.scr and the kernel (target/images/Image, or Image-test) on the boot partition; U-Boot's
# distro boot finds boot.scr and sets ${devtype} ${devnum} ${distro_bootpart}. The kernel gets
# U-Boot's own device tree (${fdtcontroladdr}), which U-Boot fixes up (memory, /chosen) for booti.
echo "kernel: loading Image from ${devtype} ${devnum}:${distro_bootpart}"
load ${devtype} ${devnum}:${distro_bootpart} ${kernel_addr_r} Image
booti ${kernel_addr_r} - ${fdtcontroladdr}
