#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Prove that `dkms build` of kvblk works against installed
# kernel headers, then leave the system as it was.
#
# Usage: make dkms-build [KVER=...], or this script with an optional KVER
# argument, from anywhere; needs root and dkms.
#
# Copies dkms.conf, kmod/ sources and include/uapi/linux/kvblk.h into
# /usr/src/kvblk-<ver>, runs `dkms add` and `dkms build -k KVER`, prints the
# build log on failure, and always removes the DKMS registration and the
# copy again. Idempotent: a leftover kvblk/<ver> from an interrupted run is
# removed first. KVER defaults to the newest kernel with installed headers.
set -eu

top=$(cd "$(dirname "$0")/.." && pwd)
ver=$(sed -n 's/^PACKAGE_VERSION="\(.*\)"$/\1/p' "$top/dkms.conf")
kver=${1:-$(make -s -C "$top/kmod" --no-print-directory print-kver)}
src=/usr/src/kvblk-$ver

[ -n "$ver" ] || { echo "dkms-check: no PACKAGE_VERSION in dkms.conf" >&2; exit 1; }
[ -n "$kver" ] || { echo "dkms-check: no kernel headers installed" >&2; exit 1; }
command -v dkms >/dev/null || { echo "dkms-check: dkms not installed (make deps-vm)" >&2; exit 1; }

cleanup() {
	dkms remove "kvblk/$ver" --all >/dev/null 2>&1 || true
	rm -rf "$src" "/var/lib/dkms/kvblk/$ver"
	rmdir /var/lib/dkms/kvblk 2>/dev/null || true
}
cleanup
trap cleanup EXIT INT TERM

mkdir -p "$src/kmod" "$src/include/uapi/linux"
cp "$top/dkms.conf" "$src/"
cp "$top"/kmod/*.c "$top"/kmod/*.h "$top/kmod/Kbuild" "$top/kmod/Makefile" \
   "$top/kmod/conftest.sh" "$src/kmod/"
rm -f "$src/kmod/conftest.h"
cp "$top/include/uapi/linux/kvblk.h" "$src/include/uapi/linux/"

dkms add "kvblk/$ver"
if ! dkms build "kvblk/$ver" -k "$kver"; then
	cat "/var/lib/dkms/kvblk/$ver/build/make.log" 2>/dev/null || true
	echo "dkms-check: dkms build kvblk/$ver for $kver FAILED" >&2
	exit 1
fi
# dkms keeps the log of a successful build next to the module.
log=$(find "/var/lib/dkms/kvblk/$ver/$kver" -name make.log 2>/dev/null | head -n 1)
[ -n "$log" ] || { echo "dkms-check: no make.log of the DKMS build" >&2; exit 1; }
if grep -E 'warning:|error:|Skipping' "$log"; then
	echo "dkms-check: the DKMS build printed warnings (above)" >&2
	exit 1
fi
modinfo "/var/lib/dkms/kvblk/$ver/$kver/$(uname -m)/module/kvblk.ko" 2>/dev/null |
	grep -E '^(filename|version|vermagic|depends):' || true
echo "dkms-check: dkms build kvblk/$ver for $kver: OK (warning-free); registration removed"
