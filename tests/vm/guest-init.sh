#!/bin/busybox sh
# SPDX-License-Identifier: MIT
# shellcheck shell=dash disable=SC1091,SC2153  # guest.env is written at run time
#
# /init of the kvblk test VM (busybox ash, PID 1 in the initramfs).
#
# 1. loads virtio_pci, 9p and nvme (modules in the initramfs);
# 2. mounts the host's root read-only (9p tag "hostroot") on /host and the
#    run folder (9p tag "results", writable) on /results;
# 3. reads /results/guest.env (written by run-vm.sh), mounts proc, sys,
#    devtmpfs, devpts, tmpfs (/tmp, /run, /dev/shm), debugfs and tracefs in
#    /host, for a chroot kernel its /lib/modules/KVER over /host/lib/modules,
#    and bind-mounts /results over the run folder's own host path, so
#    every path is the same inside `chroot /host` as on the host;
# 4. waits for the data namespace (serial kvblk0; usually /dev/nvme0n1) and a
#    second one (serial kvblk1) when the variant has it, then runs tests/vm/guest-run.sh (mode run) or an
#    interactive shell (mode shell) in `chroot /host`;
# 5. powers off.
export PATH=/bin:/sbin
say() { echo "vm-init: $*"; }
halt() {
	sync
	poweroff -f
}
die() {
	say "FATAL: $*"
	halt
}

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev

modprobe -a virtio_pci 9pnet_virtio 9p nvme || die "modprobe failed"
p9=trans=virtio,version=9p2000.L,msize=262144
mount -t 9p -o "$p9,ro,cache=loose" hostroot /host || die "cannot mount the host root (9p)"
mount -t 9p -o "$p9" results /results || die "cannot mount the results share (9p)"
[ -r /results/guest.env ] || die "no guest.env in the results share"
. /results/guest.env

mount -t proc proc /host/proc
mount -t sysfs sysfs /host/sys
mount -t devtmpfs devtmpfs /host/dev
mkdir -p /host/dev/pts /host/dev/shm
mount -t devpts devpts /host/dev/pts
mount -t tmpfs -o mode=1777 tmpfs /host/dev/shm
# A checkout under /tmp (CI may clone there) would vanish under the guest's
# own /tmp: keep it visible at the same path through a bind mount.
case $KVBLK_SRC in
/tmp/*)
	mkdir -p /srcbind
	mount -o bind "/host$KVBLK_SRC" /srcbind || die "cannot bind $KVBLK_SRC"
	mount -t tmpfs -o mode=1777 tmpfs /host/tmp
	mkdir -p "/host$KVBLK_SRC"
	mount -o bind /srcbind "/host$KVBLK_SRC" || die "cannot rebind $KVBLK_SRC"
	;;
*)
	mount -t tmpfs -o mode=1777 tmpfs /host/tmp
	;;
esac
mount -t tmpfs -o mode=755 tmpfs /host/run
# A kernel from a release's chroot (KVBLK_VM_KERNEL): its modules replace the
# host's /lib/modules, so that the host's modprobe in the chroot finds them.
if [ -n "${KVBLK_VM_KROOT:-}" ]; then
	mount -t tmpfs -o mode=755 tmpfs /host/lib/modules || die "no tmpfs on /lib/modules"
	mkdir -p "/host/lib/modules/$KVBLK_VM_KVER"
	mount -o bind "/host$KVBLK_VM_KROOT/lib/modules/$KVBLK_VM_KVER" \
		"/host/lib/modules/$KVBLK_VM_KVER" || die "cannot bind the kernel's modules"
fi
mount -t debugfs debugfs /host/sys/kernel/debug 2>/dev/null
mount -t tracefs tracefs /host/sys/kernel/tracing 2>/dev/null
# No command-name recording: with it, the first trace event enabled (kmod-trace,
# the kvblk_batch_start count of libkvblk-targets, kvblkctl trace) also enables
# sched_switch and sched_wakeup, and the kernel patches their sites in the
# scheduler while the other vCPU runs them. Under TCG that other vCPU now and
# then executes the int3 of the patch after the patch is done ("Oops: int3" in
# ttwu_do_activate from a timer softirq, 7.2 two-ns, 1 run in 12, 2026-12-03;
# CI's "Fatal exception in interrupt" the same day). Only kvblk's own sites
# are patched then; trace lines show "<...>" for the task name, which no case
# reads. (record-cmd is a top-level option; instances take it when made.)
echo 0 >/host/sys/kernel/tracing/options/record-cmd 2>/dev/null
mount -o bind /results "/host$KVBLK_VM_RESULTS" || die "cannot bind the results share"

# The data namespace is that of the controller with serial kvblk0: with a
# second controller (the p2p variants) the nvme driver's asynchronous probes
# decide which one becomes nvme0.
i=0
while :; do
	for s in /sys/class/nvme/nvme*/serial; do
		read -r ser <"$s" 2>/dev/null || continue
		[ "$ser" = kvblk0 ] || continue
		c=${s%/serial}
		c=${c##*/}
		if [ -b "/dev/${c}n1" ] && [ -c "/dev/ng${c#nvme}n1" ]; then
			KVBLK_TEST_DEVICE=/dev/${c}n1 KVBLK_TEST_NGDEV=/dev/ng${c#nvme}n1
			break 2
		fi
	done
	i=$((i + 1))
	[ $i -gt 300 ] && die "no namespace of the controller with serial kvblk0 appeared in 30 s"
	sleep 0.1
done
export KVBLK_TEST_DEVICE KVBLK_TEST_NGDEV
# A variant with a second namespace (VM_NS2_BYTES): the controller with serial
# kvblk1 gives KVBLK_TEST_DEVICE2 and KVBLK_TEST_NGDEV2.
if [ -n "${KVBLK_VM_NS2_BYTES:-}" ]; then
	i=0
	while :; do
		for s in /sys/class/nvme/nvme*/serial; do
			read -r ser <"$s" 2>/dev/null || continue
			[ "$ser" = kvblk1 ] || continue
			c=${s%/serial}
			c=${c##*/}
			if [ -b "/dev/${c}n1" ] && [ -c "/dev/ng${c#nvme}n1" ]; then
				KVBLK_TEST_DEVICE2=/dev/${c}n1 KVBLK_TEST_NGDEV2=/dev/ng${c#nvme}n1
				break 2
			fi
		done
		i=$((i + 1))
		[ $i -gt 300 ] && die "no namespace of the controller with serial kvblk1 appeared in 30 s"
		sleep 0.1
	done
	export KVBLK_TEST_DEVICE2 KVBLK_TEST_NGDEV2
fi

hostname kvblk-vm
export HOME=/root TERM=${TERM:-linux}
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
case $KVBLK_VM_MODE in
run)
	chroot /host /bin/bash "$KVBLK_VM_DIR/guest-run.sh" ||
		say "guest-run.sh exited with status $?"
	;;
shell)
	[ -n "${KVBLK_VM_TTY_ROWS:-}" ] && stty rows "$KVBLK_VM_TTY_ROWS" cols "$KVBLK_VM_TTY_COLS"
	say "variant $KVBLK_VM_VARIANT: $KVBLK_TEST_DEVICE, LBA $KVBLK_VM_LBA B, max command $KVBLK_VM_MAX_CMD_BYTES B"
	say "chroot of the host's root (read-only) in $KVBLK_SRC; writable: /tmp, $KVBLK_VM_RESULTS"
	say "'exit' powers off; Ctrl-A X kills QEMU"
	if [ -x /host/bin/bash ]; then
		sh="exec bash --rcfile $KVBLK_VM_DIR/guest-shellrc -i"
	else
		sh="exec /bin/busybox sh -i"
	fi
	setsid cttyhack chroot /host /bin/sh -c "cd $KVBLK_SRC && $sh"
	;;
*)
	say "unknown KVBLK_VM_MODE '$KVBLK_VM_MODE'"
	;;
esac

umount "/host$KVBLK_VM_RESULTS" 2>/dev/null
umount /results 2>/dev/null
halt
