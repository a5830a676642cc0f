#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Makes, once, a minbase Debian chroot of RELEASE (trixie or sid) that holds
# that release's kernel: linux-image-amd64 (/boot/vmlinuz-<kver> and
# /lib/modules/<kver>), linux-headers-amd64 (/lib/modules/<kver>/build), and
# the release's own gcc, make and kmod to build modules against it. The VM
# harness boots that kernel (KVBLK_VM_KERNEL=RELEASE, see tests/vm/README.md)
# and builds kvblk.ko for it inside the chroot.
#
# The root lives in $KVBLK_VM_KROOTS/RELEASE (default build/kroots/RELEASE)
# and is reused while its stamp file (.kvblk-kroot, written last) is there;
# a root without the stamp (an interrupted run) is removed and made again. A
# root whose stamp lists other packages than this script (an older recipe)
# gets the missing ones installed, not a new root.
# Progress goes to stderr; the kernel version the root holds to stdout.
#
# usage: mkroot.sh [--force] RELEASE
#   --force  make the root again even when it is complete
# Environment: KVBLK_VM_MIRROR (default: the Debian mirror of the host's apt
# sources, else http://deb.debian.org/debian).
set -euo pipefail
. "$(dirname "$0")/../lib.sh"

force=0
[ "${1:-}" = --force ] && { force=1; shift; }
release=${1:?usage: mkroot.sh [--force] trixie|sid}
case $release in
trixie | sid) ;;
*) vm_die "mkroot.sh: release '$release' is not trixie or sid" ;;
esac

kroots=$(vm_kroots_dir)
root=$kroots/$release
stamp=$root/.kvblk-kroot
log() { vm_log "kroot $release: $*"; }

# The Debian mirror apt already uses here (deb822 or one-line sources).
mirror() {
	local m
	[ -n "${KVBLK_VM_MIRROR:-}" ] && { echo "$KVBLK_VM_MIRROR"; return; }
	m=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list \
		/etc/apt/sources.list.d/*.sources 2>/dev/null |
		grep -oE 'https?://[^ ]+/debian/?( |$)' | grep -v security | head -n 1 | tr -d ' ')
	echo "${m:-http://deb.debian.org/debian}"
}

# Prints the one kernel version of the root that has an image, modules and
# headers.
root_kver() {
	local d v found=
	for d in "$root"/lib/modules/*/; do
		v=$(basename "$d")
		[ -f "$root/boot/vmlinuz-$v" ] && [ -f "$d/modules.dep" ] &&
			[ -f "$d/build/Makefile" ] && found=$v
	done
	[ -n "$found" ] && echo "$found"
}

mkdir -p "$kroots"
exec 9>"$kroots/.$release.lock"
if ! flock -n 9; then
	log "waiting for another mkroot.sh of $release"
	flock 9
fi

# linux-image: /boot/vmlinuz and the modules; linux-headers: the build tree
# and the release's gcc; perl: W=1 runs the headers' scripts/kernel-doc.
pkgs=(linux-image-amd64 linux-headers-amd64 make gcc kmod perl)
export DEBIAN_FRONTEND=noninteractive
tmp=$kroots/.$release.log

install_pkgs() {
	if ! vm_in_kroot "$root" apt-get -q update >"$tmp" 2>&1 ||
	   ! vm_in_kroot "$root" apt-get install -y -q "${pkgs[@]}" >>"$tmp" 2>&1; then
		tail -n 20 "$tmp" >&2
		vm_die "apt-get in the $release root failed (log: $tmp)"
	fi
	vm_in_kroot "$root" apt-get clean
}

write_stamp() {	# seconds
	kver=$(root_kver) || vm_die "no kernel with image, modules and headers in $root"
	printf 'kver=%s\nrelease=%s\npkgs=%s\nmade=%s\nseconds=%s\n' "$kver" "$release" \
		"${pkgs[*]}" "$(date -u +%FT%TZ)" "$1" >"$stamp.tmp"
	mv -f "$stamp.tmp" "$stamp"
	rm -f "$tmp"
}

if [ $force = 0 ] && [ -f "$stamp" ] && kver=$(root_kver); then
	if ! grep -qxF "pkgs=${pkgs[*]}" "$stamp"; then
		t0=$SECONDS
		log "installing the packages this recipe adds: ${pkgs[*]}"
		install_pkgs
		write_stamp $((SECONDS - t0))
	fi
	echo "$kver"
	exit 0
fi

t0=$SECONDS
if [ -e "$root" ]; then
	log "removing an incomplete or old root"
	rm -rf --one-file-system "$root"
fi
command -v debootstrap >/dev/null || vm_die "debootstrap not installed (run: make deps-vm)"
url=$(mirror)
log "debootstrap --variant=minbase $release from $url"
# debootstrap's own mounts (/proc) live in a private mount namespace that
# ends with it, as those of vm_in_kroot do: nothing stays mounted in the root.
if ! unshare -m --propagation private debootstrap --variant=minbase "$release" "$root" "$url" \
	>"$tmp" 2>&1; then
	tail -n 20 "$tmp" >&2
	vm_die "debootstrap of $release failed (log: $tmp)"
fi
t1=$SECONDS
log "debootstrap done in $((t1 - t0)) s"

# Release files here may be older than their Valid-Until; no recommends, no
# docs; the kernel's own initramfs is never made (the harness makes its own):
# update-initramfs (initramfs-tools) and dracut, whichever the release's
# kernel pulls in, are diverted to a no-op.
cat >"$root/etc/apt/apt.conf.d/90kvblk" <<'EOF'
Acquire::Check-Valid-Until "false";
APT::Install-Recommends "false";
APT::Install-Suggests "false";
EOF
cat >"$root/etc/dpkg/dpkg.cfg.d/90kvblk" <<'EOF'
path-exclude=/usr/share/doc/*
path-exclude=/usr/share/man/*
path-exclude=/usr/share/info/*
path-exclude=/usr/share/locale/*
EOF
for f in /usr/sbin/update-initramfs /usr/bin/dracut; do
	vm_in_kroot "$root" dpkg-divert --quiet --local --rename --add "$f"
	mkdir -p "$root${f%/*}"
	printf '#!/bin/sh\n# kvblk kroot: the VM harness makes its own initramfs\nexit 0\n' \
		>"$root$f"
	chmod 755 "$root$f"
done

log "apt-get install ${pkgs[*]}"
install_pkgs
t2=$SECONDS
log "packages installed in $((t2 - t1)) s"
write_stamp $((t2 - t0))
log "kernel $kver, gcc $(vm_in_kroot "$root" gcc -dumpfullversion), $(du -sh --one-file-system "$root" | cut -f1), $((t2 - t0)) s"
echo "$kver"
