#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# VM case (tests/vm/cases.list): the removal of an NVMe PCI function waits
# for a PRP attach's probe that has its page mapped for the function
# (review-2 N9a). The probe maps a page of its own for the function, reads
# one LBA into it and unmaps it (kmod/engine_prp.c, kvblk_probe_ext_lba());
# an unmap after device_del() is review H1's NULL dereference behind an
# IOMMU. So the probe maps and unmaps under the removal's read side
# (kvblk_dma_map_begin()), which kvblk's bus notification takes for write
# before the function is deleted.
#
# The test hook test_probe_hold_ms makes the probe sleep 8 s with its page
# mapped. A PRP attach (kmod_hold -e prp) starts; once the kernel log says
# the probe holds its page, the nvme driver is unbound from the function
# (the driver's removal and the bus notification kvblk tears down on, as
# for a removal of the function; the function itself stays, so the
# namespace comes back under its name for the cases after this one). Then:
#  - the unbind returns only after the probe's hold is over (the log has
#    "probe hold over" by then);
#  - the attach fails with ENODEV (the namespace went away under the probe);
#  - nvme is bound again and the namespace is back.
# The suite fails the case on any kernel report (an Oops of the unmap).
#
# Without the fix (the probe's map outside the read side) the unbind
# returns while the probe still sleeps, and the case fails on the order.
#
# Unbinds the controller: run it late in its VM, before ns-removal.
. "$(dirname "$0")/../../vm/cases/lib.sh"

dev=${KVBLK_TEST_DEVICE:-/dev/nvme0n1}
[ -b "$dev" ] || skip "$dev is not a block device"
[ -f "${KVBLK_KO:-}" ] || skip "kvblk.ko not built (make -C kmod)"
hold=$KVBLK_SRC/tests/kmod-smoke/kmod_hold
[ -x "$hold" ] || skip "$hold not built"
pci=$(readlink -f "/sys/class/block/${dev##*/}/device/device")
bdf=${pci##*/}
drv=/sys/bus/pci/drivers/nvme
[ -e "$drv/$bdf" ] || skip "$bdf is not bound to nvme"
# 8 s: the unbind must start while the probe holds its page, and finding the hook's log line
# (dmesg polled) took over 2.5 s of the first 3 s on the debug kernel under host load: the
# unbind then began after the hold, the probe's Read found the namespace still there, and the
# attach succeeded (2026-12-06). The order is now checked too (below).
hold_ms=8000

insmod "$KVBLK_KO" || fail "insmod $KVBLK_KO"
param=/sys/module/kvblk/parameters/test_probe_hold_ms
[ -w "$param" ] || fail "$param: no test hook"
work=$(mktemp -d /tmp/kvblk-probe.XXXXXX)
hpid=
back() {	# nvme bound again, the namespace back
	[ -e "$drv/$bdf" ] || echo "$bdf" >"$drv/bind" 2>/dev/null || true
	for _ in $(seq 100); do [ -b "$dev" ] && break; sleep 0.1; done
}
cleanup() {	# also after a failure
	set +e
	echo 0 >"$param" 2>/dev/null
	[ -n "$hpid" ] && wait "$hpid" 2>/dev/null
	back
	rmmod kvblk 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT

echo $hold_ms >"$param" || fail "setting $param"
mark="kvblk-vm: probe-removal $$"
echo "$mark" >/dev/kmsg
klog() { dmesg | sed -n "/$mark/,\$p" | grep 'kvblk:' || true; }
"$hold" -e prp -A ENODEV "$dev" >"$work/out" 2>&1 &
hpid=$!
for _ in $(seq 200); do
	klog | grep -q 'test hook: probe page mapped' && break
	kill -0 "$hpid" 2>/dev/null || break
	sleep 0.05
done
klog | grep -q 'test hook: probe page mapped' ||
	{ cat "$work/out"; klog; fail "the attach's probe did not reach the hook in 10 s"; }
ok "the PRP attach's probe holds its page mapped for $bdf ($hold_ms ms)"

since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }
t0=$EPOCHREALTIME
echo "kvblk-vm: probe-removal $$: unbind" >/dev/kmsg
echo "$bdf" >"$drv/unbind" || fail "unbind $bdf"
over=0
klog | grep -q 'test hook: probe hold over' && over=1
echo "unbind of $bdf returned after $(since "$t0") s"
dmesg | sed -n "/$mark/,\$p"
# The unbind must have begun while the probe held its page, else nothing below is tested.
dmesg | sed -n "/$mark/,\$p" | grep -E 'probe-removal [0-9]+: unbind|test hook: probe hold over' |
	head -n 1 | grep -q ': unbind$' ||
	fail "the unbind began after the probe's hold of $hold_ms ms was over: the guest was too slow to test the order (raise hold_ms)"
[ $over = 1 ] ||
	fail "the unbind of $bdf returned while the probe still had its page mapped (no \"probe hold over\" yet)"
ok "the unbind of $bdf waited for the probe's unmap ($(since "$t0") s)"

rc=0
wait "$hpid" || rc=$?
hpid=
cat "$work/out"
[ $rc = 0 ] || fail "the PRP attach during the unbind did not fail with ENODEV (kmod_hold exit $rc)"
ok "the PRP attach failed with ENODEV"

echo 0 >"$param"
back
[ -b "$dev" ] || fail "$dev did not come back after the unbind"
ok "$bdf back: $dev"
