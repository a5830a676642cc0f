#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Builds, once, the debug kernel of the rig (KVBLK_VM_KERNEL=debug): Debian's
# 6.1 kernel source (the linux-source-6.1 package, the series the host runs)
# configured as x86_64 defconfig + kvm_guest.config + kernels/debug.config
# (KASAN, kmemleak, lockdep, atomic-sleep checks, debug objects, DMA-API
# debugging, fault injection). defconfig instead of Debian's own config: the
# guest needs a few dozen drivers, not thousands, and the build is about a
# tenth (about an hour on two cores instead of most of a day with KASAN).
#
# The result has the layout of a kernel root (kernels/mkroot.sh), so the
# harness boots it as it boots those: $KVBLK_VM_KROOTS/debug/boot/vmlinuz-KVER
# and lib/modules/KVER, whose build link points at the built tree under
# build/debug-kernel (kvblk.ko and the test modules are built against it with
# this machine's compiler, the one Debian builds 6.1 with). The root is reused
# while its stamp (.kvblk-kroot: the source version and a hash of this script
# and the fragment) matches; anything else builds again (incrementally: the
# tree stays).
#
# kernels/debug-patches/*.patch are applied to the source first (each patch's
# header says why: so far only a false positive of the DMA-API checker on
# cache-coherent machines, as upstream later judged it).
#
# Fails when the merged configuration lost a line of the fragment (a symbol
# that does not exist or whose dependencies are missing in this source).
# Progress goes to stderr (the build's output to build/debug-kernel/build.log);
# the kernel version to stdout.
#
# usage: mkdebug.sh [--force]
# Environment: KVBLK_DEBUG_JOBS (default: the number of CPUs).
set -euo pipefail
. "$(dirname "$0")/../lib.sh"

force=0
[ "${1:-}" = --force ] && force=1
tarball=/usr/src/linux-source-6.1.tar.xz
fragment=$VM_DIR/kernels/debug.config
work=$REPO/build/debug-kernel
root=$(vm_kroots_dir)/debug
stamp=$root/.kvblk-kroot
jobs=${KVBLK_DEBUG_JOBS:-$(nproc)}
log() { vm_log "debug kernel: $*"; }

[ -r "$tarball" ] || vm_die "no $tarball (scripts/install-deps.sh debug)"
srcver=$(dpkg-query -W -f='${Version}' linux-source-6.1 2>/dev/null || stat -c %Y "$tarball")
# Patches to the source (kernels/debug-patches/*.patch, -p1, in name order;
# each says why in its header).
patches=()
for p in "$VM_DIR"/kernels/debug-patches/*.patch; do
	if [ -f "$p" ]; then patches+=("$p"); fi
done
want="$srcver $(cat "$0" "$fragment" "${patches[@]}" | sha256sum | cut -c1-16)"
if [ $force = 0 ] && [ -f "$stamp" ] && [ "$(sed -n 1p "$stamp")" = "$want" ]; then
	sed -n 2p "$stamp"
	exit 0
fi

mkdir -p "$work"
src=$work/linux-source-6.1
if [ ! -f "$src/.kvblk-src" ] || [ "$(cat "$src/.kvblk-src")" != "$srcver" ]; then
	log "unpacking $tarball ($srcver)"
	rm -rf "$src"
	tar -C "$work" -xf "$tarball"
	[ -f "$src/Makefile" ] || vm_die "$tarball did not unpack into $src"
	echo "$srcver" >"$src/.kvblk-src"
fi

# The patches go onto pristine files: what an earlier set touched comes out
# of the tarball again first (mtime now, so make rebuilds it), so a changed or
# removed patch never stacks on its old form.
phash=$(cat "${patches[@]}" </dev/null | sha256sum | cut -c1-16)
if [ "$(cat "$src/.kvblk-patches" 2>/dev/null)" != "$phash" ]; then
	if [ -s "$src/.kvblk-patched-files" ]; then
		mapfile -t old <"$src/.kvblk-patched-files"
		tar -C "$work" --touch -xf "$tarball" "${old[@]/#/linux-source-6.1/}"
	fi
	: >"$src/.kvblk-patched-files"
	for p in "${patches[@]}"; do
		log "applying ${p##*/}"
		sed -n 's#^+++ b/\([^[:space:]]*\).*#\1#p' "$p" >>"$src/.kvblk-patched-files"
		patch -d "$src" -p1 --forward --quiet <"$p" || vm_die "${p##*/} does not apply to $srcver"
	done
	echo "$phash" >"$src/.kvblk-patches"
fi
kmake() { make -C "$src" -j"$jobs" LOCALVERSION=-kvblk-debug "$@"; }
log "configuring: defconfig + kvm_guest.config + $fragment"
{
	kmake defconfig
	kmake kvm_guest.config
	"$src/scripts/kconfig/merge_config.sh" -m -O "$src" "$src/.config" "$fragment"
	kmake olddefconfig
	# No version suffix from git, no signing keys to make.
	"$src/scripts/config" --file "$src/.config" -d LOCALVERSION_AUTO -d MODULE_SIG \
		--set-str SYSTEM_TRUSTED_KEYS '' --set-str SYSTEM_REVOCATION_KEYS ''
	kmake olddefconfig
} >"$work/config.log" 2>&1 || { tail -n 20 "$work/config.log" >&2; vm_die "configuration failed"; }

# Every line of the fragment must have survived the merge.
lost=()
while read -r line; do
	case $line in
	CONFIG_*=*) grep -qxF "$line" "$src/.config" || lost+=("$line") ;;
	'# CONFIG_'*' is not set') grep -qxF "$line" "$src/.config" || lost+=("$line") ;;
	esac
done <"$fragment"
[ ${#lost[@]} -eq 0 ] || vm_die "the configuration lost: ${lost[*]} (see $work/config.log)"

kver=$(kmake -s kernelrelease)
log "building $kver with $jobs jobs (log: $work/build.log)"
t0=$(date +%s)
kmake bzImage modules >"$work/build.log" 2>&1 ||
	{ tail -n 30 "$work/build.log" >&2; vm_die "build failed (log: $work/build.log)"; }
log "built in $(($(date +%s) - t0)) s"

rm -rf "$root"
mkdir -p "$root/boot"
kmake -s INSTALL_MOD_PATH="$root" modules_install >>"$work/build.log" 2>&1 ||
	vm_die "modules_install failed (log: $work/build.log)"
cp "$src/arch/x86/boot/bzImage" "$root/boot/vmlinuz-$kver"
cp "$src/.config" "$root/boot/config-$kver"
cp "$src/System.map" "$root/boot/System.map-$kver"
ln -sfn "$src" "$root/lib/modules/$kver/build"
printf '%s\n%s\n' "$want" "$kver" >"$stamp"
echo "$kver"
