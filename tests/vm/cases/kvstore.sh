#!/bin/bash
# SPDX-License-Identifier: MIT
# The kvblk store through kvblk.ko in the guest (build/tests/unit/kvstore_vm; variants/stripe4):
#
#   kvstore.sh crash     dm-log-writes over slice namespace 1 logs every write and flush of a
#                        store's puts (into the scratch namespace), marking each acknowledged
#                        batch; the log is replayed onto slice namespace 2 entry by entry and at
#                        every flush (and every mark) the store must open and every key read back
#                        as a version that was put, at least the acknowledged one; at every flush
#                        also with a random part of the next writes applied (a power cut with part
#                        of the drive's cache written): xfstests' method, with our own replayer.
#   kvstore.sh nvmeof    a store over an NVMe/TCP namespace (nvmet exporting slice namespace 3 on
#                        127.0.0.1) and slice namespace 4: kvblk.ko serves both; exact round trip.
#   kvstore.sh removal   a store over the data namespace and slice namespaces 1-3; the data
#                        namespace's PCI function is removed while get batches run: only its keys
#                        fail, every other object is exact, the store keeps serving (puts land on
#                        the others). Removes the data controller: the LAST case of its variant.
. "$(dirname "$0")/lib.sh"

mode=${1:?usage: kvstore.sh crash|nvmeof|removal}
kv=build/tests/unit/kvstore_vm
[ -x "$kv" ] || skip "$kv not built"
[ -f "$KVBLK_KO" ] || skip "$KVBLK_KO not built"

cleanup=()
on_exit() {
	local c
	for ((c = ${#cleanup[@]} - 1; c >= 0; c--)); do eval "${cleanup[c]}" || true; done
	rmmod kvblk 2>/dev/null || true
}
trap on_exit EXIT

slice() { wait_extra_ns "$1"; extra_ns "$1"; }

insmod "$KVBLK_KO" || fail "insmod $KVBLK_KO"

case $mode in
crash)
	s1=$(slice 1)
	s2=$(slice 2)
	log=$(slice 5)
	[ -n "$s1" ] && [ -n "$s2" ] && [ -n "$log" ] || skip "want slice namespaces 1, 2 and the scratch namespace (variants/stripe4)"
	modprobe dm-log-writes 2>/dev/null || modprobe dm_log_writes 2>/dev/null || skip "no dm-log-writes module"
	# The replay starts from what the logged device held: the same bytes on both.
	dd if="$s1" of="$s2" bs=1M oflag=direct status=none || fail "copy $s1 to $s2"
	dd if=/dev/zero of="$log" bs=1M count=1 oflag=direct status=none || fail "clear the log's super"
	sectors=$(blockdev --getsz "$s1")
	dmsetup create kvlog --table "0 $sectors log-writes $s1 $log" || fail "dmsetup create log-writes"
	cleanup+=("dmsetup remove kvlog 2>/dev/null")
	man=$KVBLK_VM_CASE_DIR/manifest.txt
	"$kv" crash-load --manifest "$man" --mark-cmd "dmsetup message kvlog 0 mark ack-%V" /dev/mapper/kvlog ||
		fail "the store's puts under dm-log-writes"
	dmsetup remove kvlog || fail "dmsetup remove kvlog"
	"$kv" crash-check --log "$log" --target "$s2" --manifest "$man" --seed "${KVBLK_KVSTORE_SEED:-20261204}" ||
		fail "a crash point left the store other than old, new or missing objects"
	;;
nvmeof)
	for m in nvmet nvmet-tcp nvme-tcp nvme-fabrics; do
		modprobe "$m" || skip "no module $m in $(uname -r)"
	done
	src=$(slice 3)
	other=$(slice 4)
	[ -n "$src" ] && [ -n "$other" ] || skip "want slice namespaces 3 and 4 (variants/stripe4)"
	nvmet_tcp_export "$src" kvblk-kvstore 4421
	cleanup+=("nvmet_tcp_unexport")
	"$kv" drives "$NVMET_DEV" "$other" || fail "a store over the fabric namespace and $other"
	;;
removal)
	dev=${KVBLK_TEST_DEVICE:-/dev/nvme0n1}
	m=("$dev" "$(slice 1)" "$(slice 2)" "$(slice 3)")
	for d in "${m[@]}"; do [ -b "$d" ] || skip "want the data namespace and slice namespaces 1-3 (variants/stripe4)"; done
	pci=$(readlink -f "/sys/class/block/${dev##*/}/device/device")
	[ -e "$pci/remove" ] || skip "no PCI function found for $dev ($pci)"
	log0=$(dmesg | wc -l)
	"$kv" drives --remove 0 --remove-cmd "echo 1 >$pci/remove" "${m[@]}" ||
		fail "the store across the removal of $dev"
	echo 1 >/sys/bus/pci/rescan
	rmmod kvblk || fail "rmmod kvblk after the removal"
	dmesg | tail -n +"$log0" | grep -E 'WARNING|BUG|Oops|general protection' && fail "kernel report after the removal"
	ok "removal: no kernel report"
	;;
*) fail "unknown mode $mode" ;;
esac
