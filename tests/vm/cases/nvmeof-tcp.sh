#!/bin/bash
# SPDX-License-Identifier: MIT
# NVMe over TCP inside the guest: nvmet exports slice namespace 2 of
# variants/stripe4 (a 64 MiB window of the pattern image) on 127.0.0.1:4420
# through configfs, nvme-tcp connects to it by a write to /dev/nvme-fabrics
# (no nvme-cli), and kvblk.ko attaches the fabric namespace (the multipath
# head: the block-layer engine). With tests/kmod-smoke/kmod_hold:
#
# 1. a batch of objects is byte-exact against pread(O_DIRECT) of the same
#    device, canaries around every destination;
# 2. the subsystem is unlinked from the port once kvblk has commands in
#    flight (the target drops the connection; fast_io_fail_tmo=0 fails what
#    waits for a path), and the batches go on while it is down:
#    every object of those batches is either exact or failed with EIO or
#    ENOLINK, never success with wrong bytes, canaries intact;
# 3. the subsystem is linked again, the host reconnects (reconnect_delay=1),
#    and the next batch on the same context succeeds, exact.
. "$(dirname "$0")/lib.sh"

hold=tests/kmod-smoke/kmod_hold
[ -x "$hold" ] || skip "$hold not built"
[ -f "$KVBLK_KO" ] || skip "$KVBLK_KO not built"
for m in nvmet nvmet-tcp nvme-tcp nvme-fabrics; do
	modprobe "$m" || skip "no module $m in $(uname -r)"
done
wait_extra_ns 2
src=$(extra_ns 2)
[ -n "$src" ] || skip "no slice namespace 2 (variants/stripe4)"

nqn=kvblk-oftest
cfg=/sys/kernel/config/nvmet
S=$cfg/subsystems/$nqn
P=$cfg/ports/1
inst=

cleanup() {
	set +e
	[ -n "$inst" ] && echo 1 >/sys/class/nvme/nvme$inst/delete_controller 2>/dev/null
	rm -f "$P/subsystems/$nqn" 2>/dev/null
	[ -d "$S/namespaces/1" ] && { echo 0 >"$S/namespaces/1/enable"; rmdir "$S/namespaces/1"; }
	[ -d "$S" ] && rmdir "$S"
	[ -d "$P" ] && rmdir "$P"
	[ -n "${mounted_cfg:-}" ] && umount /sys/kernel/config
	rmmod kvblk 2>/dev/null
	rmmod nvme-tcp nvmet-tcp nvmet 2>/dev/null
	true
}
trap cleanup EXIT

if [ ! -d $cfg ]; then
	mountpoint -q /sys/kernel/config || { mount -t configfs none /sys/kernel/config && mounted_cfg=1; }
fi
[ -d $cfg ] || skip "no nvmet configfs"
ip link set lo up 2>/dev/null || ifconfig lo 127.0.0.1 up || fail "bring lo up"

mkdir "$S" || fail "mkdir $S"
echo 1 >"$S/attr_allow_any_host"
mkdir "$S/namespaces/1"
echo -n "$src" >"$S/namespaces/1/device_path"
echo 1 >"$S/namespaces/1/enable" || fail "enable namespace on $src"
mkdir "$P"
echo tcp >"$P/addr_trtype"
echo ipv4 >"$P/addr_adrfam"
echo 127.0.0.1 >"$P/addr_traddr"
echo 4420 >"$P/addr_trsvcid"
ln -s "$S" "$P/subsystems/$nqn" || fail "link $nqn into port 1"

# Connect: the kernel answers the option string with "instance=N,cntlid=M".
exec 3<>/dev/nvme-fabrics || fail "open /dev/nvme-fabrics"
echo -n "transport=tcp,traddr=127.0.0.1,trsvcid=4420,nqn=$nqn,reconnect_delay=1,ctrl_loss_tmo=60,fast_io_fail_tmo=0" >&3 ||
	fail "connect to $nqn"
read -r reply <&3 || true
exec 3>&-
inst=$(sed -n 's/^instance=\([0-9]*\),.*/\1/p' <<<"$reply")
[ -n "$inst" ] || fail "connect reply '$reply'"
ok "connected: nvme$inst ($(cat /sys/class/nvme/nvme$inst/transport)), $reply"

# The fabric namespace's disk: the multipath head (or, with multipath off,
# the controller's own namespace), found by the subsystem NQN.
dev=
for ((i = 0; i < 50; i++)); do
	for b in /sys/block/nvme*n*; do
		[ "$(cat "$b/device/subsysnqn" 2>/dev/null)" = $nqn ] && dev=/dev/${b##*/}
	done
	[ -n "$dev" ] && break
	sleep 0.2
done
[ -n "$dev" ] || fail "no block device for $nqn"
[ -b "$dev" ] || mknod "$dev" b $(tr ':' ' ' <"/sys/class/block/${dev##*/}/dev")
expect_eq "$dev size" "$(blockdev --getsize64 "$dev")" "$(blockdev --getsize64 "$src")"

insmod "$KVBLK_KO" || fail "insmod $KVBLK_KO"
objs=(0:64K 1M+4K:128K 3M:1M 17M:4K 40M:2M 63M:1M)
$hold "$dev" "${objs[@]}" || fail "loads from the fabric namespace"
ok "fabric namespace: batch exact"

# Many larger objects, so that batches are in flight when the link drops.
big=()
for ((k = 0; k < 48; k++)); do big+=("$((k * 1024 + 512))K:1M=ok|EIO|ENOLINK"); done
# The drop waits until kvblk has commands in flight on the disk, so that it
# comes in the middle of a batch.
inflight=/sys/kernel/kvblk/${dev##*/}/stats/inflight
drop="(while read -r v <$inflight && [ \"\$v\" = 0 ]; do :; done; rm -f $P/subsystems/$nqn) &"
relink="ln -s $S $P/subsystems/$nqn && for i in \$(seq 150); do grep -qx live /sys/class/nvme/nvme$inst/state && exit 0; sleep 0.2; done; exit 1"
$hold -P -r "$drop" -n 4 -R "$relink" "$dev" "${big[@]}" >"$KVBLK_VM_CASE_DIR/drop.log" 2>&1 ||
	{ tail -30 "$KVBLK_VM_CASE_DIR/drop.log"; fail "batches across a dropped connection"; }
grep -E "^round|FAIL" "$KVBLK_VM_CASE_DIR/drop.log"
failed=$(grep -cE "status (EIO|ENOLINK)" "$KVBLK_VM_CASE_DIR/drop.log" || true)
[ "$failed" -gt 0 ] || fail "no object failed while the connection was down (the drop came too late?)"
ok "connection dropped: $failed objects failed with EIO/ENOLINK, the rest exact; after reconnecting the batch is exact"
