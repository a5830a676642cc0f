# SPDX-License-Identifier: MIT
# shellcheck shell=bash
#
# Helpers for case scripts that run in the guest (source it first thing).
# Exit codes follow kselftest: 0 pass, 4 skip, anything else fail.
set -euo pipefail

skip() { echo "SKIP: $*"; exit 4; }
fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { echo "ok: $*"; }

# expect_eq WHAT GOT WANT
expect_eq() {
	[ "$2" = "$3" ] || fail "$1: got '$2', want '$3'"
	ok "$1 = $2"
}

# Runs "$@" and requires it to fail with a message matching ERE $1 on stderr.
expect_fail() {
	local re=$1 err
	shift
	if err=$("$@" 2>&1 >/dev/null); then
		fail "'$*' succeeded, expected failure matching '$re'"
	fi
	[[ $err =~ $re ]] || fail "'$*' failed with '$err', expected '$re'"
	ok "'$*' failed as expected: ${err##*: }"
}

pattern() { "$KVBLK_VM_PATTERN_TOOL" "$@"; }

# extra_ns NSID: the block device of namespace NSID of the second controller
# (serial kvblkx: variants with VM_SLICE_NS / VM_SCRATCH_NS), or nothing.
extra_ns() {
	local d
	for d in /sys/block/nvme*n*; do
		[ "$(tr -d ' ' <"$d/device/serial" 2>/dev/null)" = kvblkx ] || continue
		[ "$(cat "$d/nsid" 2>/dev/null)" = "$1" ] && echo "/dev/${d##*/}"
	done
	return 0
}

# wait_extra_ns NSID: wait up to 10 s for it (the second controller's
# namespaces are scanned after the data controller's).
wait_extra_ns() {
	local i
	for ((i = 0; i < 50; i++)); do
		[ -n "$(extra_ns "$1")" ] && return 0
		sleep 0.2
	done
	return 0
}

# ext4_scratch DIR: a 64 MiB ext4 on a loop device over DIR/fs.img, mounted at
# DIR/mnt (tmpfs itself takes O_DIRECT only from Linux 6.6). Fails the case when
# it cannot; undo with ext4_scratch_undo DIR, which returns 1 when the unmount
# fails (a file left open: something leaked).
ext4_scratch() {
	local dir=$1 loop
	modprobe -q loop 2>/dev/null || true
	modprobe -q ext4 2>/dev/null || true
	truncate -s 64M "$dir/fs.img" && loop=$(losetup -f --show "$dir/fs.img") ||
		fail "no loop device over $dir/fs.img"
	echo "$loop" >"$dir/loopdev"
	mkdir -p "$dir/mnt"
	if ! mkfs.ext4 -q -F -b 4096 "$loop" || ! mount -t ext4 "$loop" "$dir/mnt"; then
		losetup -d "$loop"
		fail "cannot make and mount ext4 on $loop"
	fi
}

ext4_scratch_undo() {
	local dir=$1 r=0
	if mountpoint -q "$dir/mnt" && ! umount "$dir/mnt"; then
		echo "FAIL: umount $dir/mnt" >&2
		r=1
	fi
	[ -s "$dir/loopdev" ] && losetup -d "$(cat "$dir/loopdev")"
	return $r
}

[ -n "${KVBLK_VM_VARIANT:-}" ] || { echo "not in the kvblk test VM (KVBLK_VM_VARIANT unset)"; exit 4; }

# nvmet_tcp_export DEV NQN TCPPORT: export block device DEV through nvmet (configfs) as
# subsystem NQN on 127.0.0.1:TCPPORT (configfs port id = TCPPORT - 4419) and connect to it
# with nvme-tcp through /dev/nvme-fabrics. Sets NVMET_DEV (the fabric namespace's block
# device, found by the subsystem NQN) and NVMET_INST (its controller instance); fails the
# case when any step fails. nvmet_tcp_unexport undoes all of it (for a cleanup trap).
nvmet_tcp_export() {
	local src=$1 i b reply
	NVMET_NQN=$2
	local cfg=/sys/kernel/config/nvmet
	NVMET_S=$cfg/subsystems/$NVMET_NQN
	NVMET_P=$cfg/ports/$(($3 - 4419))
	NVMET_INST= NVMET_DEV=
	if [ ! -d $cfg ]; then
		mountpoint -q /sys/kernel/config || mount -t configfs none /sys/kernel/config || true
	fi
	[ -d $cfg ] || skip "no nvmet configfs"
	ip link set lo up 2>/dev/null || ifconfig lo 127.0.0.1 up || fail "bring lo up"
	mkdir "$NVMET_S" || fail "mkdir $NVMET_S"
	echo 1 >"$NVMET_S/attr_allow_any_host"
	mkdir "$NVMET_S/namespaces/1"
	echo -n "$src" >"$NVMET_S/namespaces/1/device_path"
	echo 1 >"$NVMET_S/namespaces/1/enable" || fail "enable namespace on $src"
	mkdir "$NVMET_P"
	echo tcp >"$NVMET_P/addr_trtype"
	echo ipv4 >"$NVMET_P/addr_adrfam"
	echo 127.0.0.1 >"$NVMET_P/addr_traddr"
	echo "$3" >"$NVMET_P/addr_trsvcid"
	ln -s "$NVMET_S" "$NVMET_P/subsystems/$NVMET_NQN" || fail "link $NVMET_NQN into $NVMET_P"
	exec 3<>/dev/nvme-fabrics || fail "open /dev/nvme-fabrics"
	echo -n "transport=tcp,traddr=127.0.0.1,trsvcid=$3,nqn=$NVMET_NQN,reconnect_delay=1,ctrl_loss_tmo=60" >&3 ||
		fail "connect to $NVMET_NQN"
	read -r reply <&3 || true
	exec 3>&-
	NVMET_INST=$(sed -n 's/^instance=\([0-9]*\),.*/\1/p' <<<"$reply")
	[ -n "$NVMET_INST" ] || fail "connect reply '$reply'"
	for ((i = 0; i < 50; i++)); do
		for b in /sys/block/nvme*n*; do
			[ "$(cat "$b/device/subsysnqn" 2>/dev/null)" = "$NVMET_NQN" ] && NVMET_DEV=/dev/${b##*/}
		done
		[ -n "$NVMET_DEV" ] && break
		sleep 0.2
	done
	[ -n "$NVMET_DEV" ] || fail "no block device for $NVMET_NQN"
	[ -b "$NVMET_DEV" ] || mknod "$NVMET_DEV" b $(tr ':' ' ' <"/sys/class/block/${NVMET_DEV##*/}/dev")
	ok "nvmet: $src exported as $NVMET_NQN, connected: nvme$NVMET_INST, $NVMET_DEV"
}

nvmet_tcp_unexport() {
	[ -n "${NVMET_INST:-}" ] && echo 1 >/sys/class/nvme/nvme$NVMET_INST/delete_controller 2>/dev/null
	rm -f "$NVMET_P/subsystems/$NVMET_NQN" 2>/dev/null
	[ -d "$NVMET_S/namespaces/1" ] && { echo 0 >"$NVMET_S/namespaces/1/enable"; rmdir "$NVMET_S/namespaces/1"; }
	[ -d "$NVMET_S" ] && rmdir "$NVMET_S"
	[ -d "$NVMET_P" ] && rmdir "$NVMET_P"
	return 0
}
