// Package disk builds a Raspberry Pi SD-card image file from two directory
// trees, with no loop devices, no mounts and no root privileges.
//
// The image has a DOS (MBR) partition table with two partitions, as Debian's
// own raspi images do:
//
//	offset 4 MiB   partition 1, type 0x0c (FAT32, LBA), label RASPIFIRM:
//	               the boot firmware's files (config.txt, cmdline.txt, the
//	               kernel, the initrd, device trees), mounted at /boot/firmware
//	next 4 MiB     partition 2, type 0x83 (Linux), ext4, label RASPIROOT:
//	               the root filesystem (cmdline.txt says root=LABEL=RASPIROOT)
//
// Build makes each filesystem in a file of its own with the host's tools
// (mkfs.vfat and mcopy from dosfstools and mtools, mke2fs -d from e2fsprogs),
// writes the partition table with sfdisk (fdisk) on a sparse image file, and
// copies the filesystems in at their offsets, leaving zero blocks as holes.
// Compress writes the image zstd-compressed with a sha256sum file beside it.
package disk
