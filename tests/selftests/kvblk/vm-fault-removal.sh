#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# VM case (tests/vm/cases.list): the removal of an NVMe PCI function does
# not wait for a PRP batch whose preparation waits on its own process
# (review-2 N3). tests/selftests/kvblk/kvblk_fault_hold loads into a range
# it remapped over userfaultfd and does not serve the fault: kvblk's check
# of the range's pages waits in that fault. Meanwhile the nvme driver is
# unbound from the function (kvblk's removal runs from the bus notifier,
# as for a removal of the function, and waits for the PRP batches that
# entered the namespace): the unbind must end within 20 s although the
# fault is not served. Then the fault is served: the load ends with ESTALE
# (descriptor 0, the first into the buffer whose range no longer maps its
# pinned pages) or ENODEV, a second one with ENODEV; nvme is bound again and kvblk unloads.
#
# Without the fix (the count taken in the PRP engine's begin, before the
# page check), the unbind waits until the fault is served: the case
# serves it after 20 s so that the guest goes on, and fails.
#
# With -r the held call is a P2PDMA registration (kvblk_fault_hold -r): of
# an anonymous range under userfaultfd, whose first page kvblk pins to
# check it is P2PDMA memory; once served it ends with EINVAL. Without the
# fix (the pin under the removal's read side, kvblk_dma_reg_begin()), the
# unbind waits until the fault is served. Skips without P2PDMA (6.1, 6.12).
#
# Unbinds the controller: run it late in its VM, before ns-removal.
. "$(dirname "$0")/../../vm/cases/lib.sh"

mode=()
what="load"
if [ "${1:-}" = -r ]; then
	mode=(-r)
	what="P2PDMA registration"
fi

dev=${KVBLK_TEST_DEVICE:-/dev/nvme0n1}
[ -b "$dev" ] || skip "$dev is not a block device"
[ -f "${KVBLK_KO:-}" ] || skip "kvblk.ko not built (make -C kmod)"
hold=$KVBLK_SRC/build-selftests/kvblk/kvblk_fault_hold
[ -x "$hold" ] || skip "$hold not built"
pci=$(readlink -f "/sys/class/block/${dev##*/}/device/device")
bdf=${pci##*/}
drv=/sys/bus/pci/drivers/nvme
[ -e "$drv/$bdf" ] || skip "$bdf is not bound to nvme"

insmod "$KVBLK_KO" || fail "insmod $KVBLK_KO"
# A write to the helper's stdin after it exited must not kill the case.
trap '' PIPE
work=$(mktemp -d /tmp/kvblk-fault.XXXXXX)
mkfifo "$work/in"
"$hold" "${mode[@]}" "$dev" <"$work/in" >"$work/out" 2>&1 &
hpid=$!
exec 8>"$work/in"	# the helper's stdin: a line serves the fault

rebind() {
	[ -e "$drv/$bdf" ] || echo "$bdf" >"$drv/bind" 2>/dev/null || true
	for _ in $(seq 100); do [ -b "$dev" ] && break; sleep 0.1; done
}
cleanup() {	# also after a failure: the helper served and gone, nvme bound, kvblk out
	set +e
	echo go >&8 2>/dev/null
	exec 8>&-
	wait "$hpid" 2>/dev/null
	rebind
	rmmod kvblk 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT

for _ in $(seq 300); do
	grep -q '^FAULTED' "$work/out" && break
	kill -0 "$hpid" 2>/dev/null || break
	sleep 0.1
done
if grep -q '^SKIP' "$work/out"; then
	skip "$(grep '^SKIP' "$work/out")"
fi
grep -q '^FAULTED' "$work/out" || { cat "$work/out"; fail "the $what did not reach the fault in 30 s"; }
ok "$(grep '^FAULTED' "$work/out"): the $what waits in its own process's fault"

since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }
t0=$EPOCHREALTIME
(echo "$bdf" >"$drv/unbind") &
upid=$!
for _ in $(seq 200); do kill -0 "$upid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$upid" 2>/dev/null; then
	echo go >&8
	wait "$upid"
	fail "the unbind of $bdf waited for the fault: not done in 20 s, done $(since "$t0") s after the unbind began"
fi
wait "$upid" || fail "unbind $bdf failed"
ok "unbind of $bdf in $(since "$t0") s with the fault not served"
if ! kill -0 "$hpid" 2>/dev/null; then
	rc=0
	wait "$hpid" || rc=$?
	cat "$work/out"
	fail "kvblk_fault_hold ended (status $rc) before its fault was served"
fi

echo go >&8
rc=0
wait "$hpid" || rc=$?
cat "$work/out"
[ $rc = 0 ] || fail "kvblk_fault_hold exited with $rc"
if [ ${#mode[@]} = 0 ]; then
	ok "the held load ended as it must once served; the next one ENODEV"
else
	ok "the held P2PDMA registration ended with EINVAL once served"
fi
rebind
[ -b "$dev" ] || fail "$dev did not come back after nvme was bound again"
ok "nvme bound again: $dev"
