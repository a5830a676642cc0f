#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Boots one kvblk test VM: a Debian kernel (this machine's from /boot, or a
# release's from its chroot, KVBLK_VM_KERNEL) under QEMU (TCG), the
# host's root shared read-only over 9p, an emulated NVMe controller shaped by
# a variant (tests/vm/variants/NAME.conf), and the run folder shared writable.
#
# usage: run-vm.sh --run-dir DIR [--timeout SECONDS] VARIANT    run DIR/cases.tsv
#        run-vm.sh --shell VARIANT                              interactive shell
# VARIANT is NAME or NAME:key=value[:key=value...] (see README.md). Exit status: QEMU's,
# 124 when the timeout stopped it.
# shellcheck disable=SC2054  # commas inside QEMU option values
set -euo pipefail
. "$(dirname "$0")/lib.sh"

mode=run run_dir='' timeout_s=600
while [ $# -gt 1 ]; do
	case $1 in
	--shell) mode=shell; shift ;;
	--run-dir) run_dir=$2; shift 2 ;;
	--timeout) timeout_s=$2; shift 2 ;;
	*) vm_die "run-vm.sh: unknown option $1" ;;
	esac
done
[ $# -eq 1 ] || vm_die "usage: run-vm.sh [--shell | --run-dir DIR [--timeout S]] VARIANT"
vm_load_variant "$1"

vm_kernel_select
kver=$(vm_kernel_version)
kernel=$(vm_kernel_image "$kver")
initrd=$("$VM_DIR/mkinitramfs.sh" "$kver")
tool=$(vm_pattern_tool)
img=$(vm_pattern_image "$VM_DISK_BYTES")
if [ $mode = shell ]; then
	run_dir=$VM_OUT/runs/shell-$(date +%Y%m%d-%H%M%S)-$$/$VM_INSTANCE
	timeout_s=${KVBLK_VM_SHELL_TIMEOUT:-3600}
fi
[ -n "$run_dir" ] || vm_die "run-vm.sh: --run-dir is required"
mkdir -p "$run_dir"
run_dir=$(cd "$run_dir" && pwd)

# Settings the guest sees: guest-init.sh sources this file and exports it to
# every case (the list is documented in README.md).
{
	env_line() { echo "export $1=$(vm_shquote "$2")"; }
	env_line KVBLK_VM_MODE "$mode"
	env_line KVBLK_VM_RESULTS "$run_dir"
	env_line KVBLK_SRC "$REPO"
	env_line KVBLK_VM_DIR "$VM_DIR"
	env_line KVBLK_VM_KVER "$kver"
	env_line KVBLK_VM_KERNEL "$VM_KREL"
	env_line KVBLK_VM_KROOT "$VM_KROOT"
	env_line KVBLK_VM_KBUILD "${KVBLK_VM_KBUILD:-$REPO}"
	env_line KVBLK_VM_VARIANT "$VM_VARIANT"
	env_line KVBLK_VM_VARIANT_NAME "$VM_NAME"
	env_line KVBLK_VM_LBA "$VM_LBA"
	env_line KVBLK_VM_MDTS "$VM_MDTS"
	env_line KVBLK_VM_MAX_CMD_BYTES "$VM_MAX_CMD_BYTES"
	env_line KVBLK_VM_QPAIRS "$VM_QPAIRS"
	env_line KVBLK_VM_DISK_BYTES "${VM_NS_BYTES:-$VM_DISK_BYTES}"
	env_line KVBLK_VM_IOMMU "$VM_IOMMU"
	[ -n "$VM_BAD_BYTE_OFFSET" ] && env_line KVBLK_VM_BAD_BYTE_OFFSET "$VM_BAD_BYTE_OFFSET"
	[ -n "$VM_BAD_GROWS" ] && env_line KVBLK_VM_BAD_GROWS "$VM_BAD_GROWS"
	env_line KVBLK_VM_PATTERN_XOR 0x6b76626c6b000000
	env_line KVBLK_VM_PATTERN_TOOL "$tool"
	env_line KVBLK_TEST_DEVICE /dev/nvme0n1
	env_line KVBLK_TEST_NGDEV /dev/ng0n1
	if [ -n "$VM_NS2_BYTES" ]; then
		env_line KVBLK_VM_NS2_OFFSET "$VM_NS2_OFFSET"
		env_line KVBLK_VM_NS2_BYTES "$VM_NS2_BYTES"
		env_line KVBLK_VM_NS2_LBA "$VM_NS2_LBA"
	fi
	env_line KVBLK_KO "${KVBLK_VM_KBUILD:-$REPO}/kmod/kvblk.ko"
	[ -n "${KVBLK_FUZZ_ARGS:-}" ] && env_line KVBLK_FUZZ_ARGS "$KVBLK_FUZZ_ARGS"
	if [ $mode = shell ] && rows_cols=$(stty size 2>/dev/null); then
		env_line KVBLK_VM_TTY_ROWS "${rows_cols% *}"
		env_line KVBLK_VM_TTY_COLS "${rows_cols#* }"
	fi
} >"$run_dir/guest.env"

drive=file=$img,if=none,id=nv0,format=raw,snapshot=on
if [ -n "$VM_BAD_BYTE_OFFSET" ] && [ "$VM_BAD_GROWS" = write ]; then
	# A grown defect (grow=write): blkdebug starts in state 1, where reads
	# are good; the first write that reaches the namespace moves it to
	# state 2, where the bad LBA fails. Writes must reach blkdebug, so no
	# snapshot=on (its overlay would sit above blkdebug and take them):
	# the guest writes to a copy of the pattern image in the run folder,
	# removed when QEMU exits.
	cat >"$run_dir/blkdebug.conf" <<-EOF
	[set-state]
	state = "1"
	event = "write_aio"
	new_state = "2"

	[inject-error]
	state = "2"
	event = "read_aio"
	errno = "5"
	sector = "$((VM_BAD_BYTE_OFFSET / 512))"
	once = "off"
	EOF
	cp --sparse=always "$img" "$run_dir/grow.img"
	drive="driver=raw,file.driver=blkdebug,file.config=$run_dir/blkdebug.conf,file.image.driver=file,file.image.filename=$run_dir/grow.img,if=none,id=nv0"
elif [ -n "$VM_BAD_BYTE_OFFSET" ]; then
	cat >"$run_dir/blkdebug.conf" <<-EOF
	[inject-error]
	event = "read_aio"
	errno = "5"
	sector = "$((VM_BAD_BYTE_OFFSET / 512))"
	once = "off"
	EOF
	drive=file=blkdebug:$run_dir/blkdebug.conf:$img,if=none,id=nv0,format=raw,snapshot=on
fi

# More namespaces, on a second controller (serial kvblkx, so that the data
# controller keeps its one namespace whatever order the guest probes them
# in): slices of the pattern image, nsid 1..N (each a different part, so
# that a read from the wrong member never matches), then a blank scratch
# namespace, nsid N+1. Cases find them by serial and nsid.
more_ns=()
nsid=0
if [ "${VM_SLICE_NS:-0}" -gt 0 ] || [ -n "${VM_SCRATCH_NS:-}" ]; then
	more_ns+=(-device "nvme,id=nvmex,serial=kvblkx,mdts=$VM_MDTS,max_ioqpairs=$VM_QPAIRS")
fi
if [ "${VM_SLICE_NS:-0}" -gt 0 ]; then
	slice=$((VM_DISK_BYTES / VM_SLICE_NS))
	for ((k = 0; k < VM_SLICE_NS; k++)); do
		nsid=$((nsid + 1))
		more_ns+=(-drive "driver=raw,offset=$((k * slice)),size=$slice,file.driver=file,file.filename=$img,if=none,id=nx$nsid,snapshot=on"
			-device "nvme-ns,drive=nx$nsid,bus=nvmex,nsid=$nsid,logical_block_size=$VM_LBA,physical_block_size=$VM_LBA")
	done
fi
if [ -n "${VM_SCRATCH_NS:-}" ]; then
	nsid=$((nsid + 1))
	truncate -s "$VM_SCRATCH_NS" "$run_dir/scratch.img"
	more_ns+=(-drive "file=$run_dir/scratch.img,if=none,id=nx$nsid,format=raw,snapshot=on"
		-device "nvme-ns,drive=nx$nsid,bus=nvmex,nsid=$nsid,logical_block_size=$VM_LBA,physical_block_size=$VM_LBA")
fi

machine=q35
iommu=()
if [ "$VM_IOMMU" = 1 ]; then
	machine=q35,kernel-irqchip=split
	iommu=(-device intel-iommu,intremap=on)
fi
# printk.devkmsg=on: the runner's /dev/kmsg markers are never rate-limited.
# tsc=reliable: TCG's vCPU TSCs look unsynchronized, and the HPET fallback makes
# every clock read an emulated MMIO access (fio, timeouts, dmesg get slow).
# The debug kernel: no5lvl. With -cpu max the guest has LA57 and 6.1 runs
# 5-level paging; an interrupt taken before the boot CPU's features are final
# (identify_cpu) made generic KASAN report a "wild-memory-access" at a valid
# direct-map address (ff11...) in handle_edge_irq, as if it computed the
# shadow's bounds for 4-level paging (1 boot of 3, 2026-12-02; no module loaded).
# And ignore_loglevel: a guest stuck in the kernel leaves only its console,
# and "quiet" kept the soft-lockup and RCU-stall reports' stacks off it
# (2026-12-03: "soft lockup - CPU#0 stuck for 26s! [kvblkctl]" with no stack).
# Every kernel: loglevel=5 (after "quiet") puts KERN_WARNING and KERN_DEFAULT
# lines on the console too: the stacks of soft-lockup, hung-task and RCU-stall
# reports (printed at KERN_DEFAULT) and the runner's "kvblk-vm: START" markers,
# so that the console of a guest that died (its dmesg.txt was last saved after
# the case before) still says which case it died in and where (run-suite.sh
# console_part, lib.sh vm_report_outside_kvblk; CI 2026-12-03 kept only
# "soft lockup ... [kvblkctl]").
[ "$VM_KREL" = debug ] && append_krel="no5lvl ignore_loglevel"
append="console=ttyS0 quiet loglevel=5 panic=-1 printk.devkmsg=on tsc=reliable ${append_krel:-} $VM_APPEND ${KVBLK_VM_APPEND:-}"
read -ra extra <<<"$VM_QEMU_EXTRA ${KVBLK_VM_QEMU_EXTRA:-}"
# A second controller (serial kvblk1) whose namespace is a window of the same
# image: its byte b is the image's byte VM_NS2_OFFSET + b (raw offset/size).
ns2=()
if [ -n "$VM_NS2_BYTES" ]; then
	ns2=(-drive "file=$img,if=none,id=nv1,format=raw,snapshot=on,offset=$VM_NS2_OFFSET,size=$VM_NS2_BYTES"
		-device "nvme,id=nvme1,serial=kvblk1,mdts=$VM_MDTS,max_ioqpairs=$VM_QPAIRS"
		-device "nvme-ns,drive=nv1,bus=nvme1,nsid=1,logical_block_size=$VM_NS2_LBA,physical_block_size=$VM_NS2_LBA")
fi
# Devices the data controller's bus needs (a PCIe switch), placed before it.
read -ra pre <<<"$VM_QEMU_PRE"
qemu=("$QEMU" -nodefaults -machine "$machine" -accel tcg -cpu max
	-smp "${KVBLK_VM_SMP:-2}" -m "${KVBLK_VM_MEM:-2G}" -display none -no-reboot
	-kernel "$kernel" -initrd "$initrd" -append "$append"
	"${iommu[@]}"
	-virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap
	-virtfs "local,path=$run_dir,mount_tag=results,security_model=none"
	-drive "$drive"
	"${pre[@]}"
	-device "nvme,id=nvme0,serial=kvblk0,mdts=$VM_MDTS,max_ioqpairs=$VM_QPAIRS${VM_NVME_BUS:+,bus=$VM_NVME_BUS}"
	-device "nvme-ns,drive=nv0,bus=nvme0,nsid=1,logical_block_size=$VM_LBA,physical_block_size=$VM_LBA${VM_NS_PROPS:+,$VM_NS_PROPS}"
	"${ns2[@]}"
	"${more_ns[@]}"
	"${extra[@]}")
printf '%q ' "${qemu[@]}" >"$run_dir/qemu.cmd"
echo >>"$run_dir/qemu.cmd"

export TMPDIR=$run_dir	# snapshot=on puts its (deleted) overlay file here
if [ $mode = shell ]; then
	exec timeout --foreground "$timeout_s" "${qemu[@]}" -serial mon:stdio
fi

# One test VM at a time on this machine (2 cores): two TCG guests side by
# side each run at half speed and both risk timeouts. Shells do not lock.
t_wait=$EPOCHREALTIME
if [ "${KVBLK_VM_LOCK:-1}" != 0 ]; then
	exec 8>"${KVBLK_VM_LOCK_FILE:-/tmp/kvblk-vm.lock}"
	if ! flock -n 8; then
		wait_max=${KVBLK_VM_LOCK_WAIT:-900}
		vm_log "waiting for another test VM on this machine to finish (at most $wait_max s; KVBLK_VM_LOCK=0: do not wait)"
		flock -w "$wait_max" 8 || vm_log "still busy after $wait_max s: starting anyway"
	fi
fi

# Run mode: QEMU in the background so that Ctrl-C / TERM stop it at once.
t_start=$EPOCHREALTIME
# Appending (O_APPEND): the watcher's notes below land after QEMU's lines.
: >"$run_dir/qemu.log"
timeout -k 10 "$timeout_s" "${qemu[@]}" -serial "file:$run_dir/console.log" -monitor none \
	</dev/null >>"$run_dir/qemu.log" 2>&1 &
pid=$!
# A guest that wrote its last result (guest-run.sh's "done") powers off within
# seconds. Sid's 7.2 under TCG once sat idle there for 9 minutes (its timers
# stalled: "rcu_preempt kthread timer wakeup didn't happen"): stop such a
# guest after KVBLK_VM_DONE_GRACE seconds; every result is already written.
# A case whose result has not come KVBLK_VM_STUCK_GRACE seconds (default 60
# plus a quarter of its timeout) after its own timeout and the guest's
# watchdog (15 s) ran out has a guest that no longer runs its runner (the
# debug kernel once spun both vCPUs for 30 minutes with nothing on the
# console): stop QEMU and name the case in DIR/stuck, so that run-suite.sh
# can boot again for the cases after it instead of waiting for the VM's
# whole budget. A guest whose runner has not started (guest-run.sh writes
# DIR/started) KVBLK_VM_BOOT_TIMEOUT seconds (default 120) after QEMU did is
# stopped too: run-suite.sh boots such a guest once more. The debug kernel's
# iommu guest once went idle during early boot ("Running RCU-tasks wait API
# self tests", no CPU used) with 9,140 s of budget left for its cases.
(
	cur='' since=0 n=0 booted='' t0=$SECONDS
	boot0=$(stat -c %y "$run_dir/started" 2>/dev/null || true)	# a resumed boot's dir has one
	while kill -0 $pid 2>/dev/null; do
		if [ -z "$booted" ] && [ $((n % 5)) = 0 ]; then
			if [ "$(stat -c %y "$run_dir/started" 2>/dev/null || true)" != "$boot0" ]; then
				booted=1
			elif [ $((SECONDS - t0)) -gt "${KVBLK_VM_BOOT_TIMEOUT:-120}" ]; then
				echo "run-vm.sh: the guest's runner did not start within ${KVBLK_VM_BOOT_TIMEOUT:-120} s of QEMU: stopping QEMU" >>"$run_dir/qemu.log"
				kill -TERM $pid 2>/dev/null
				exit 0
			fi
		fi
		if [ -f "$run_dir/done" ]; then
			sleep "${KVBLK_VM_DONE_GRACE:-30}"
			kill -0 $pid 2>/dev/null || exit 0
			echo "run-vm.sh: the guest finished but did not power off; stopping QEMU" >>"$run_dir/qemu.log"
			kill -TERM $pid 2>/dev/null
			exit 0
		fi
		if [ $((++n % 5)) = 0 ] && [ -f "$run_dir/current" ]; then
			last=$(cat "$run_dir/current")	# guest-run.sh: the case it started last
			[ "$last" = "$cur" ] || { cur=$last since=$SECONDS; }
			if [ -n "$cur" ] && [ ! -f "$run_dir/cases/$cur.rc" ]; then
				tmo=$(awk -F'\t' -v c="$cur" '$1 == c { print $2 }' "$run_dir/cases.tsv")
				limit=$((${tmo:-600} + 15 + ${KVBLK_VM_STUCK_GRACE:-$((60 + ${tmo:-600} / 4))}))
				if [ $((SECONDS - since)) -gt "$limit" ]; then
					echo "$cur" >"$run_dir/stuck"
					echo "run-vm.sh: case $cur has no result $limit s after it started: the guest is stuck; stopping QEMU" >>"$run_dir/qemu.log"
					kill -TERM $pid 2>/dev/null
					exit 0
				fi
			fi
		fi
		sleep 1
	done
) 8>&- &	# without the VM lock: its sleep may outlive a kill of the watcher by 30 s
watcher=$!
trap 'kill -TERM $pid 2>/dev/null' INT TERM
rc=0
wait $pid || rc=$?
if [ $rc -gt 128 ] && kill -0 $pid 2>/dev/null; then	# interrupted: reap QEMU
	wait $pid || true
fi
kill $watcher 2>/dev/null || true
wait $watcher 2>/dev/null || true
rm -f "$run_dir/grow.img"
# Seconds QEMU ran, and seconds spent waiting for another VM first.
awk -v w="$t_wait" -v s="$t_start" -v e="$EPOCHREALTIME" \
	'BEGIN { printf "%.1f %.1f\n", e - s, s - w }' >"$run_dir/vm.times"
exit $rc
