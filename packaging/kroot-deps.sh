#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The Debian packages that kvblk-dkms needs (dkms, adduser and what they pull in) and that a
# kernel root of the VM rig (tests/vm/kernels/mkroot.sh: trixie for 6.12, sid for 7.2) lacks,
# downloaded from that release's archive into OUT (default build/deb-deps/RELEASE), so that
# make vmtest-install KERNEL=6.12|7.2 installs kvblk-dkms in that root with apt from local
# files (the guest has no network). apt resolves against a copy of the root's dpkg status:
# the root itself is only read. Nothing to do when OUT already holds a complete set.
# usage: packaging/kroot-deps.sh RELEASE KROOT [OUT]
set -euo pipefail
rel=$1 kroot=$2
top=$(cd "$(dirname "$0")/.." && pwd)
out=$(realpath -m "${3:-$top/build/deb-deps/$rel}")
[ -f "$kroot/var/lib/dpkg/status" ] || { echo "kroot-deps: no dpkg status in $kroot" >&2; exit 1; }
[ -f "$out/complete" ] && { echo "kroot-deps: $out is complete"; exit 0; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/lists/partial" "$tmp/cache" "$tmp/dpkg" "$out/partial"
cp "$kroot/var/lib/dpkg/status" "$tmp/dpkg/status"
# The root's own archive lines, with Debian's keyring.
for f in "$kroot"/etc/apt/sources.list "$kroot"/etc/apt/sources.list.d/*.list; do
	[ ! -f "$f" ] || cat "$f"
done | sed -n 's#^deb \(http[^ ]*\) #deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] \1 #p' \
	>"$tmp/sources.list"
[ -s "$tmp/sources.list" ] || { echo "kroot-deps: no deb line in $kroot/etc/apt" >&2; exit 1; }
cat >"$tmp/apt.conf" <<CONF
Dir::Etc::sourcelist "$tmp/sources.list";
Dir::Etc::sourceparts "-";
Dir::State::Lists "$tmp/lists";
Dir::State::status "$tmp/dpkg/status";
Dir::Cache "$tmp/cache";
Dir::Cache::archives "$out";
APT::Architecture "amd64";
APT::Architectures { "amd64"; };
Acquire::Languages "none";
APT::Sandbox::User "root";
CONF
export APT_CONFIG=$tmp/apt.conf
apt-get update -qq
# kvblk-dkms's own dependencies (debian/control: adduser; dh-dkms adds dkms).
apt-get install -qq -y --download-only --no-install-recommends dkms adduser
rm -rf "$out/partial" "$out/lock"
ls -1 "$out"/*.deb >"$out/complete"
echo "kroot-deps: $(wc -l <"$out/complete") packages for $rel in $out"
