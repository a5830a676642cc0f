#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Builds the test VM's initramfs for kernel KVER and prints its path. Cached
# under $KVBLK_VM_OUT/initramfs/; rebuilt only when an input changes (this
# script, guest-init.sh, busybox, the module files, the module list).
#
# Contents: /bin/busybox (busybox-static) and its applet links, /init
# (guest-init.sh), /dev/console, and the modules needed to reach the host's
# root and the NVMe namespace, with their dependencies, copied from
# $VM_KROOT/lib/modules/KVER (decompressed when they are .ko.xz/.zst/.gz) and
# indexed with the host's `depmod -b`. Every other module is loadable later
# from the chroot with the host's own modprobe (the guest runs the kernel
# whose /lib/modules the host has; for a chroot kernel, guest-init.sh puts
# the chroot's /lib/modules/KVER there).
#
# usage: mkinitramfs.sh KVER   (KVBLK_VM_KERNEL selects the kernel's root)
set -euo pipefail
. "$(dirname "$0")/lib.sh"

kver=${1:?usage: mkinitramfs.sh KVER}
read -ra extra <<<"${KVBLK_VM_EXTRA_MODULES:-}"
modules=(virtio_pci 9pnet_virtio 9p nvme "${extra[@]}")
busybox=$(command -v busybox) || vm_die "busybox not found (run: make deps-vm)"
vm_kernel_select
moddir=$VM_KROOT/lib/modules/$kver
[ -f "$moddir/modules.dep" ] || vm_die "no $moddir/modules.dep"

# Every module file with its dependencies: "insmod /lib/modules/.../x.ko" lines.
mod_files() {
	local m
	for m in "${modules[@]}"; do
		modprobe ${VM_KROOT:+-d "$VM_KROOT"} -S "$kver" --show-depends "$m" ||
			vm_die "module $m not found for $kver"
	done | awk '$1 == "insmod" { print $2 }' | sort -u
}

mapfile -t files < <(mod_files)
out=$VM_OUT/initramfs
img=$out/initramfs-$kver.cpio
hash=$(vm_hash "$0" "$VM_DIR/guest-init.sh" "$busybox" "${modules[*]}" "$VM_KROOT" \
	"$(stat -c '%n %s %Y' "${files[@]}")")

mkdir -p "$out"
exec 9>"$out/.lock"
flock 9
if [ -f "$img" ] && [ "$(cat "$img.hash" 2>/dev/null)" = "$hash" ]; then
	echo "$img"
	exit 0
fi

root=$(mktemp -d "$out/root.XXXXXX")
trap 'rm -rf "$root"' EXIT
mkdir -p "$root"/{bin,sbin,dev,proc,sys,tmp,host,results,lib/modules/"$kver"}
cp "$busybox" "$root/bin/busybox"
for applet in $("$busybox" --list); do
	[ "$applet" = busybox ] || ln -s busybox "$root/bin/$applet"
done
mknod -m 600 "$root/dev/console" c 5 1
mknod -m 666 "$root/dev/null" c 1 3
install -m 755 "$VM_DIR/guest-init.sh" "$root/init"

for f in "${files[@]}"; do
	dst=$root${f#"$VM_KROOT"}
	mkdir -p "$(dirname "$dst")"
	case $f in
	*.ko) cp "$f" "$dst" ;;
	*.ko.xz) xz -dc "$f" >"${dst%.xz}" ;;
	*.ko.zst) zstd -qdc "$f" >"${dst%.zst}" ;;
	*.ko.gz) gzip -dc "$f" >"${dst%.gz}" ;;
	*) vm_die "unknown module file type: $f" ;;
	esac
done
for f in modules.order modules.builtin modules.builtin.modinfo; do
	[ -f "$moddir/$f" ] && cp "$moddir/$f" "$root/lib/modules/$kver/"
done
depmod -b "$root" "$kver"

(cd "$root" && find . -print0 | LC_ALL=C sort -z |
	cpio --null -o -H newc --quiet) >"$img.tmp.$$"
mv -f "$img.tmp.$$" "$img"
echo "$hash" >"$img.hash"
vm_log "initramfs for $kver: $img ($(du -h "$img" | cut -f1), ${#files[@]} modules)"
echo "$img"
