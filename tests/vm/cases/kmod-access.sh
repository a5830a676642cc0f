#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Access to /dev/kvblk as unprivileged users (issue 14 item 5), without the packages:
#   1. the group kvblk (groupadd --system, as kvblk-dkms's postinst makes it) and users
#      kvacc and kvhold in it, kvout outside it (useradd on a copy of /etc's files, bind-mounted
#      over /etc/passwd and /etc/group: the guest's root is read-only);
#   2. kvblk.ko loaded, then packaging/60-kvblk.rules applied as udev would: its match
#      (KERNEL, SUBSYSTEM) checked against /sys/class/misc/kvblk, its GROUP and MODE read from
#      the rule and applied with chgrp/chmod (the rig has no udevd; make vmtest-install runs the
#      packaged rule through systemd-udevd);
#   3. tests/kmod-smoke/kmod_access as those users (setpriv --init-groups), see its header:
#      kvout gets EACCES; kvacc attaches only what its own fds allow (O_WRONLY, O_PATH, a device
#      it cannot open), cannot write a module parameter, is held to RLIMIT_MEMLOCK, and loads
#      byte-exact from a node it may read; kvhold's buffer id is unknown in kvacc's context;
#   4. the PRP engine on a partition: EPERM for kvacc, the block-layer engine alone without a
#      flag; root's PRP attach there works.
# kvacc's and kvhold's block device nodes (mknod, 0600 owned by each) stand for a device the
# administrator let that user read; the namespace's own node (root-only in the rig) is the one
# they cannot open.
# shellcheck source=tests/vm/cases/lib.sh
. "$(dirname "$0")/lib.sh"

dev=${KVBLK_TEST_DEVICE:-/dev/nvme0n1}
rule=packaging/udev/60-kvblk.rules
bin=tests/kmod-smoke/kmod_access
scratch=/tmp/kvblk-access
binds=()
hold_pid=

cleanup() {
	set +e
	[ -z "$hold_pid" ] || kill "$hold_pid" 2>/dev/null
	wait 2>/dev/null
	rmmod kvblk 2>/dev/null
	for m in "${binds[@]}"; do umount "$m"; done
	rm -f /dev/kvblk-acc-own /dev/kvblk-acc-hold /dev/kvblk-acc-part
	rm -rf "$scratch"
}
trap cleanup EXIT
grep -q '^kvblk ' /proc/modules && fail "kvblk is loaded before the test"

# 1. Group and users.
rm -rf "$scratch"
mkdir -m 0755 "$scratch" "$scratch/etc" "$scratch/bin"
cp /etc/passwd /etc/group /etc/shadow /etc/gshadow "$scratch/etc/"
groupadd -P "$scratch" --system kvblk || fail "groupadd kvblk"
useradd -P "$scratch" -M -d /tmp -U -G kvblk kvacc || fail "useradd kvacc"
useradd -P "$scratch" -M -d /tmp -U -G kvblk kvhold || fail "useradd kvhold"
useradd -P "$scratch" -M -d /tmp -U kvout || fail "useradd kvout"
for f in passwd group; do
	chmod 0644 "$scratch/etc/$f"
	mount --bind "$scratch/etc/$f" "/etc/$f" || fail "bind mount /etc/$f"
	binds+=("/etc/$f")
done
gid=$(getent group kvblk | cut -d: -f3)
[ -n "$gid" ] && [ "$gid" -lt 1000 ] || fail "kvblk is not a system group: '$gid'"
ok "group kvblk ($gid): $(getent group kvblk | cut -d: -f4); kvout: $(id -nG kvout)"
id -nG kvacc | grep -qw disk && fail "kvacc is in group disk"
# The binary where every user can run it (the checkout may not be readable to them).
install -m 0755 "$bin" "$scratch/bin/kmod_access"
as() { local u=$1; shift; setpriv --reuid="$u" --regid="$u" --init-groups --inh-caps=-all \
	env -i PATH=/usr/bin:/bin "$@"; }

# 2. Module and rule.
insmod "$KVBLK_KO" || fail "insmod $KVBLK_KO"
[ -c /dev/kvblk ] || fail "no /dev/kvblk after insmod"
expect_eq "/dev/kvblk before the rule" "$(stat -c '%a %U:%G' /dev/kvblk)" "600 root:root"
rl=$(grep -v '^[[:space:]]*#' "$rule" | grep -F 'KERNEL==')
[ "$(printf '%s\n' "$rl" | wc -l)" = 1 ] || fail "$rule: want one rule line, got: $rl"
field() { printf '%s\n' "$rl" | sed -n "s/.*\\b$1\\(==\\|=\\)\"\\([^\"]*\\)\".*/\\2/p"; }
[ "$(field KERNEL)" = kvblk ] || fail "rule KERNEL '$(field KERNEL)'"
[ "$(field SUBSYSTEM)" = misc ] || fail "rule SUBSYSTEM '$(field SUBSYSTEM)'"
[ "$(basename "$(readlink -f /sys/class/misc/kvblk/subsystem)")" = misc ] ||
	fail "/sys/class/misc/kvblk is not in subsystem misc"
mode=$(field MODE) group=$(field GROUP)
[ -n "$mode" ] && [ -n "$group" ] || fail "rule without MODE or GROUP: $rl"
chgrp "$group" /dev/kvblk && chmod "$mode" /dev/kvblk || fail "apply GROUP=$group MODE=$mode"
expect_eq "/dev/kvblk after the rule" "$(stat -c '%a %U:%G' /dev/kvblk)" "660 root:kvblk"

# The users' own nodes of the namespace.
# (No process substitution: the rig's /dev has no /dev/fd.)
mm=$(stat -c '%t %T' "$dev")
maj=${mm% *} min=${mm#* }
mknod -m 0600 /dev/kvblk-acc-own b $((16#$maj)) $((16#$min)) && chown kvacc:kvacc /dev/kvblk-acc-own ||
	fail "mknod kvacc's node"
mknod -m 0600 /dev/kvblk-acc-hold b $((16#$maj)) $((16#$min)) && chown kvhold:kvhold /dev/kvblk-acc-hold ||
	fail "mknod kvhold's node"
# The namespace's own node: devtmpfs makes it root 0600 (no udev to give it to disk).
ok "$dev is $(stat -c '%a %U:%G' "$dev"): kvacc may not open it (kmod_access checks EACCES)"

# 3. The users.
as kvout "$scratch/bin/kmod_access" outsider || fail "outsider"
as kvacc "$scratch/bin/kmod_access" member /dev/kvblk-acc-own "$dev" || fail "member"
mkdir -m 0700 "$scratch/hold" && chown kvhold "$scratch/hold"
as kvhold "$scratch/bin/kmod_access" holder /dev/kvblk-acc-hold "$scratch/hold" &
hold_pid=$!
for ((i = 0; i < 300; i++)); do
	[ -s "$scratch/hold/id" ] && break
	kill -0 "$hold_pid" 2>/dev/null || break
	sleep 0.1
done
[ -s "$scratch/hold/id" ] || fail "the holder wrote no buffer id"
id=$(cat "$scratch/hold/id")
rc=0
as kvacc "$scratch/bin/kmod_access" foreign /dev/kvblk-acc-own "$id" || rc=$?
touch "$scratch/hold/go"
hrc=0
wait "$hold_pid" || hrc=$?
hold_pid=
[ "$rc" = 0 ] || fail "foreign (kvacc naming kvhold's buffer id $id)"
[ "$hrc" = 0 ] || fail "holder (kvhold)"

# 4. The PRP engine on a partition takes CAP_SYS_ADMIN (review M3), as the nvme driver's
#    passthrough does: kvacc's KVBLK_ATTACH_F_ENGINE_PRP on a partition node it owns is
#    EPERM, its attach without a flag gets the block-layer engine alone (engines 0x4) and
#    loads exact; root gets the PRP engine there. The partition: 8 MiB at 1 MiB (BLKPG).
if command -v addpart >/dev/null; then
	addpart "$dev" 1 2048 16384 || fail "addpart $dev"
	part=${dev}p1
	for ((i = 0; i < 50; i++)); do [ -e "/sys/class/block/${part##*/}/dev" ] && break; sleep 0.1; done
	pmm=$(cat "/sys/class/block/${part##*/}/dev") || fail "no ${part##*/} after addpart"
	mknod -m 0600 /dev/kvblk-acc-part b "${pmm%:*}" "${pmm#*:}" && chown kvacc:kvacc /dev/kvblk-acc-part ||
		fail "mknod kvacc's partition node"
	install -m 0755 tests/kmod-smoke/kmod_hold "$scratch/bin/kmod_hold"
	as kvacc "$scratch/bin/kmod_hold" -e prp -A EPERM /dev/kvblk-acc-part ||
		{ rm -f /dev/kvblk-acc-part; delpart "$dev" 1; fail "kvacc: PRP engine on a partition"; }
	out=$(as kvacc "$scratch/bin/kmod_hold" /dev/kvblk-acc-part 0:64K 1M:128K) ||
		{ rm -f /dev/kvblk-acc-part; delpart "$dev" 1; fail "kvacc: default attach of a partition: $out"; }
	echo "$out" | grep -q "engine 2 engines 0x4 " ||
		{ rm -f /dev/kvblk-acc-part; delpart "$dev" 1; fail "kvacc's default attach of a partition: want engines 0x4 (bio only): $out"; }
	out=$(tests/kmod-smoke/kmod_hold -e prp /dev/kvblk-acc-part 0:64K) ||
		{ rm -f /dev/kvblk-acc-part; delpart "$dev" 1; fail "root: PRP engine on a partition: $out"; }
	rm -f /dev/kvblk-acc-part
	delpart "$dev" 1 || fail "delpart $dev 1"
	ok "PRP engine on a partition: EPERM without CAP_SYS_ADMIN (block-layer engine alone, exact), root's works"
fi

rmmod kvblk || fail "rmmod kvblk after the users closed their contexts"
ok "access: outsider refused, member limited to its own fds, buffer ids per context"
