#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Install test of the Debian packages (make vmtest-install; tests/vm/install.list): in the
# guest, a writable Debian root is an overlay (tmpfs upper) over the guest's read-only root,
# the host's bookworm, which has no kvblk package. In it, as a serving host would:
#   1. apt-get install ./build/deb/*.deb (local files; the dependencies are already there):
#      DKMS builds kvblk.ko for the running kernel in kvblk-dkms's postinst (timed);
#   2. dkms status says installed; modprobe kvblk loads it from updates/dkms;
#   3. udevd (started in the root, as the rig has no init) applies 60-kvblk.rules:
#      /dev/kvblk is 0660 root:kvblk (and Debian's rules make the namespace root:disk);
#   4. a user in groups kvblk and disk runs kvblkctl list (the namespace listed while that
#      user has a context attached) and kvblk-bench (kmod backend,
#      every byte verified) on the emulated namespace, and imports the Python package;
#      a user in disk only gets EACCES on /dev/kvblk;
#   5. apt-get purge of every package: no module, no DKMS entry, no package file left, and
#      nothing with kvblk in its path left in the overlay's upper layer but the group.
# On a kernel of a kernel root (6.12: trixie, 7.2: sid; KVBLK_VM_KROOT) the writable root is an
# overlay over that root, which has the kernel's headers and the compiler they need (gcc-14,
# gcc-16): there apt installs kvblk-dkms with dkms, adduser and what they need from
# build/deb-deps/RELEASE (packaging/kroot-deps.sh, that release's own packages), DKMS builds
# kvblk.ko with that release's compiler, then steps 2 and 5 as above. Steps 3 and 4 run on 6.1
# only: the other packages are built on bookworm for bookworm (and the kroots have no udevd);
# the rule and the users are checked on every kernel by the case kmod-access.
# shellcheck source=tests/vm/cases/lib.sh
. "$(dirname "$0")/lib.sh"

debs=$KVBLK_SRC/build/deb
ver=$(cat "$KVBLK_SRC/VERSION")
ls "$debs"/kvblk-dkms_"$ver"_all.deb >/dev/null 2>&1 || skip "no packages in $debs (make deb)"
pkgs=(kvblk-dkms libkvblk0 libkvblk-dev kvblk-tools python3-kvblk)
files=("kvblk-dkms_${ver}_all.deb" "libkvblk0_${ver}_amd64.deb" "libkvblk-dev_${ver}_amd64.deb"
	"kvblk-tools_${ver}_amd64.deb" "python3-kvblk_${ver}_amd64.deb")
lower=/ full=1 depdir=
if [ -n "${KVBLK_VM_KROOT:-}" ]; then
	rel=$(basename "$KVBLK_VM_KROOT")
	depdir=$KVBLK_SRC/build/deb-deps/$rel
	[ -f "$depdir/complete" ] || skip "no $depdir (make vmtest-install KERNEL=$KVBLK_VM_KERNEL fetches it)"
	lower=$KVBLK_VM_KROOT full=0
	pkgs=(kvblk-dkms)
	files=("kvblk-dkms_${ver}_all.deb")
fi
dev=${KVBLK_TEST_DEVICE:-/dev/nvme0n1}
kver=$(uname -r)
scratch=/tmp/kvblk-install
root=$scratch/root
upper=$scratch/upper
# SYSTEMD_IGNORE_CHROOT: udevadm trigger/settle/control refuse to act in a chroot otherwise.
in_root() { chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
	LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive SYSTEMD_IGNORE_CHROOT=1 "$@"; }
udevd_pid=
devfd=
t() { date +%s; }

cleanup() {
	set +e
	if [ -n "$udevd_pid" ]; then kill "$udevd_pid" 2>/dev/null; sleep 1; fi
	rmmod kvblk 2>/dev/null
	[ -z "$devfd" ] || rm -f /dev/fd
	for m in run/udev dev/pts dev sys proc tmp; do umount -l "$root/$m" 2>/dev/null; done
	umount -l "$root" 2>/dev/null
	umount -l "$upper" 2>/dev/null
	rm -rf "$scratch"
}
trap cleanup EXIT
grep -q '^kvblk ' /proc/modules && fail "kvblk is loaded before the test"

mkdir -p "$scratch/tmp" "$upper" "$scratch/work" "$root"
modprobe overlay || fail "modprobe overlay"
mount -t tmpfs -o size=1500M,mode=0755 kvblk-install "$upper"
mkdir -p "$upper/u" "$upper/w"
mount -t overlay overlay -o "lowerdir=$lower,upperdir=$upper/u,workdir=$upper/w" "$root" ||
	fail "overlay over $lower"
mount -t proc proc "$root/proc"
mount --bind /sys "$root/sys"
mount --bind /dev "$root/dev"
mount --bind /dev/pts "$root/dev/pts"
# bash's process substitution (dkms uses it) needs /dev/fd, which only udev or systemd make.
devfd=
[ -e /dev/fd ] || { ln -s /proc/self/fd /dev/fd && devfd=1; }
mount -t tmpfs tmpfs "$root/tmp"
mount -t tmpfs tmpfs "$root/run"
mkdir -p "$root/run/udev" "$root/run/lock"
ok "writable root: overlay over $lower (upper on tmpfs)$([ $full = 1 ] || echo ", $(in_root gcc --version | head -n1)")"
# The packages where the root sees them (a kernel root does not hold the checkout).
mkdir -p "$root/tmp/debs"
for f in "${files[@]}"; do cp "$debs/$f" "$root/tmp/debs/"; done
[ -z "$depdir" ] || cp "$depdir"/*.deb "$root/tmp/debs/"
# man-db's trigger would index every man page under TCG: minutes, nothing to test.
rm -f "$root/var/lib/man-db/auto-update"
in_root dpkg-query -W 'kvblk*' 'libkvblk*' 'python3-kvblk' 2>/dev/null | grep . &&
	fail "kvblk packages already installed in the root"

# 1. Install.
t0=$(t)
local_debs=()
for f in "$root"/tmp/debs/*.deb; do local_debs+=("/tmp/debs/${f##*/}"); done
in_root apt-get install -y --no-install-recommends -o Dpkg::Use-Pty=0 "${local_debs[@]}" \
	>"$KVBLK_VM_CASE_DIR/apt-install.log" 2>&1 ||
	{ tail -n 40 "$KVBLK_VM_CASE_DIR/apt-install.log"; fail "apt-get install"; }
t1=$(t)
echo "timing: apt-get install with the DKMS build of kvblk.ko: $((t1 - t0)) s"
grep -E 'Building module|Installing|Signing|DKMS: install completed|kvblk.ko' "$KVBLK_VM_CASE_DIR/apt-install.log" | head -n 20 || true

# 2. DKMS and modprobe.
st=$(in_root dkms status kvblk)
echo "dkms status: $st"
[[ $st == "kvblk/$ver, $kver, $(uname -m): installed"* ]] || fail "dkms status: '$st'"
ko=$(in_root modinfo -k "$kver" -n kvblk)
[[ $ko == /lib/modules/$kver/updates/dkms/kvblk.ko* ]] || fail "modinfo -n kvblk: '$ko', want updates/dkms"
ok "kvblk.ko from DKMS: $ko"
in_root modprobe kvblk || fail "modprobe kvblk"
grep -q '^kvblk ' /proc/modules || fail "kvblk not in /proc/modules after modprobe"
expect_eq "module srcversion" "$(cat /sys/module/kvblk/srcversion)" \
	"$(in_root modinfo -k "$kver" -F srcversion kvblk)"
expect_eq "autoload config" "$(grep -v '^#' "$root/usr/lib/modules-load.d/kvblk.conf")" kvblk
[ -c /dev/kvblk ] || fail "/dev/kvblk missing after modprobe"
in_root getent group kvblk >/dev/null || fail "no kvblk group after install"

if [ $full = 1 ]; then

# 3. udev applies the rule (no init in the rig: udevd runs for the check, then stops).
gid=$(in_root getent group kvblk | cut -d: -f3)
[ "$gid" -lt 1000 ] || fail "kvblk group $gid is not a system group"
in_root /lib/systemd/systemd-udevd --daemon --resolve-names=late || fail "systemd-udevd"
udevd_pid=$(pgrep -n -x systemd-udevd || true)
in_root udevadm trigger --action=add --subsystem-match=misc --sysname-match=kvblk || fail "udevadm trigger"
# The namespace too, as at a host's boot (Debian's rules: block devices root:disk 0660);
# the rig's devtmpfs made it root:root.
in_root udevadm trigger --action=add --subsystem-match=block --sysname-match="$(basename "$dev")" ||
	fail "udevadm trigger $dev"
in_root udevadm settle --timeout=60 || fail "udevadm settle"
in_root udevadm control --exit || true
udevd_pid=
expect_eq "/dev/kvblk mode owner group" "$(stat -c '%a %u %g' /dev/kvblk)" "660 0 $gid"
expect_eq "$dev mode group" "$(stat -c '%a %g' "$dev")" "660 $(in_root getent group disk | cut -d: -f3)"

# 4. Users.
in_root useradd -m -G kvblk,disk kvuser
# What docs/install.md tells the administrator to do: registered buffers count against RLIMIT_MEMLOCK
# (runuser applies it through pam_limits).
echo '@kvblk - memlock unlimited' >"$root/etc/security/limits.d/kvblk.conf"
in_root useradd -m -G disk kvother
as() { local u=$1; shift; in_root runuser -u "$u" -- "$@"; }
as kvuser kvblkctl list >"$KVBLK_VM_CASE_DIR/kvblkctl-list.txt" 2>&1 ||
	{ cat "$KVBLK_VM_CASE_DIR/kvblkctl-list.txt"; fail "kvblkctl list as kvuser"; }
cat "$KVBLK_VM_CASE_DIR/kvblkctl-list.txt"
grep -q "loaded, version $ver" "$KVBLK_VM_CASE_DIR/kvblkctl-list.txt" ||
	fail "kvblkctl list does not show kvblk.ko $ver loaded"
grep -q "^backends .*kmod" "$KVBLK_VM_CASE_DIR/kvblkctl-list.txt" ||
	fail "kvblkctl list does not offer the kmod backend"
# A namespace is listed while a context is attached to it: kvuser attaches one
# (tests/vm/kvblk_uapi.py, from the checkout the root sees) and lists meanwhile.
as kvuser env PYTHONPATH="$KVBLK_SRC/tests/vm" python3 -c '
import subprocess, sys
import kvblk_uapi as u
ctx = u.Context(sys.argv[1])
sys.exit(subprocess.call(["kvblkctl", "-o", "json", "list"]))' "$dev" \
	>"$KVBLK_VM_CASE_DIR/kvblkctl-list-attached.json" 2>&1 ||
	{ cat "$KVBLK_VM_CASE_DIR/kvblkctl-list-attached.json"; fail "kvblkctl list with a context attached"; }
python3 - "$KVBLK_VM_CASE_DIR/kvblkctl-list-attached.json" "$(basename "$dev")" <<'PY' || fail "kvblkctl list: $(basename "$dev") not attached"
import json, sys
doc = json.load(open(sys.argv[1]))
ns = [n for n in doc["namespaces"] if n["name"] == sys.argv[2]]
assert ns and ns[0]["attached"] == 1, doc["namespaces"]
print("kvblkctl list: %s attached (1 context) while kvuser holds one" % sys.argv[2])
PY
t2=$(t)
as kvuser env TMPDIR=/tmp kvblk-bench --device "$dev" --i-know-this-overwrites -n 16 -s 1 \
	--backends kmod --no-fio --repeat 1 -q -o json >"$KVBLK_VM_CASE_DIR/bench.json" \
	2>"$KVBLK_VM_CASE_DIR/bench.err" || { tail -n 20 "$KVBLK_VM_CASE_DIR/bench.err"; fail "kvblk-bench as kvuser"; }
echo "timing: kvblk-bench as kvuser: $(($(t) - t2)) s"
python3 - "$KVBLK_VM_CASE_DIR/bench.json" <<'PY' || fail "kvblk-bench result"
import json, sys
doc = json.load(open(sys.argv[1]))
res = doc["results"]
assert doc["all_verified"] is True, "all_verified is not true"
assert res and all(r["backend"] == "kmod" and r["verified"] and r["mismatched_bytes"] == 0
                   and r["failed_objects"] == 0 for r in res), res
print("kvblk-bench: %d kmod result(s), %d objects each, every byte verified" % (len(res), res[0]["objects"]))
PY
as kvuser python3 -c 'import kvblk, sys; print("python3-kvblk", kvblk.__version__); sys.exit(kvblk.__version__ != sys.argv[1])' "$ver" ||
	fail "import kvblk as kvuser"
if as kvother sh -c 'exec 3</dev/kvblk' 2>"$KVBLK_VM_CASE_DIR/other.err"; then
	fail "kvother (not in group kvblk) opened /dev/kvblk"
fi
grep -q 'Permission denied' "$KVBLK_VM_CASE_DIR/other.err" || fail "kvother: $(cat "$KVBLK_VM_CASE_DIR/other.err")"
ok "kvother (disk only) gets EACCES on /dev/kvblk"
rm -f "$root/etc/security/limits.d/kvblk.conf"	# the administrator's file, not the packages'
else
	echo "steps 3 and 4 (udev, users, tools) skipped on $KVBLK_VM_KERNEL: see the header"
fi

# 5. Purge.
rmmod kvblk || fail "rmmod kvblk"
in_root dpkg-query -L "${pkgs[@]}" 2>/dev/null |
	sort -u >"$KVBLK_VM_CASE_DIR/files.txt"
t3=$(t)
in_root apt-get purge -y -o Dpkg::Use-Pty=0 "${pkgs[@]}" \
	>"$KVBLK_VM_CASE_DIR/apt-purge.log" 2>&1 || { tail -n 30 "$KVBLK_VM_CASE_DIR/apt-purge.log"; fail "apt-get purge"; }
echo "timing: apt-get purge: $(($(t) - t3)) s"
left=$(in_root dpkg-query -W -f='${Package} ${db:Status-Abbrev}\n' 'kvblk*' 'libkvblk*' python3-kvblk 2>/dev/null | grep -v ' un ' || true)
[ -z "$left" ] || fail "packages left in dpkg's database: $left"
st=$(in_root dkms status kvblk)
[ -z "$st" ] || fail "dkms status after purge: $st"
[ ! -e "$root/var/lib/dkms/kvblk" ] || fail "/var/lib/dkms/kvblk left"
[ -z "$(ls -d "$root"/usr/src/kvblk-* 2>/dev/null)" ] || fail "/usr/src/kvblk-* left"
found=$(find "$root/lib/modules" -name 'kvblk.ko*' 2>/dev/null || true)
[ -z "$found" ] || fail "module left: $found"
in_root modinfo -k "$kver" kvblk >/dev/null 2>&1 && fail "modinfo still finds kvblk"
n=0
while read -r f; do
	[ -n "$f" ] || continue
	if [ -e "$root$f" ] && [ ! -d "$root$f" ]; then
		echo "left: $f" >&2
		n=$((n + 1))
	fi
done <"$KVBLK_VM_CASE_DIR/files.txt"
[ "$n" -eq 0 ] || fail "$n package files left after purge"
# The upper layer holds every change: only the users' homes and the group files may name kvblk.
stray=$(cd "$upper/u" && find . -path '*kvblk*' ! -path './home/*' ! -path './var/lib/dkms/mok*' | head -n 20)
[ -z "$stray" ] || fail "left in the root after purge: $stray"
ok "purge: $(wc -l <"$KVBLK_VM_CASE_DIR/files.txt") package paths, DKMS tree, module and /usr/src gone"
echo "deb-install: install $((t1 - t0)) s, whole case $(($(t) - t0)) s"
