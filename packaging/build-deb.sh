#!/bin/bash
# SPDX-License-Identifier: MIT
#
# make deb: the binary packages (debian/) built from a copy of this checkout's files (git's
# tracked and untracked-but-not-ignored ones, as they are now) in BUILD/deb/kvblk-VERSION, so
# the .debs land in BUILD/deb/ and the checkout stays clean; then lintian on every package:
# any error fails, warnings are printed.
#
# Fast to iterate (a cold build compiles the C++ tools with -O2 -g: tens of minutes on two
# busy cores; the package build runs no tests, make check does):
#   - nothing changed since the last good build (same file list, same bytes, same
#     DEB_BUILD_OPTIONS): the .debs are kept, nothing runs (KVBLK_DEB_FORCE=1 rebuilds);
#   - else the copy is refreshed file by file keeping the checkout's mtimes and CMake's build
#     directory (obj-*) is kept, so ninja recompiles only what changed (dpkg-buildpackage -nc);
#     KVBLK_DEB_CLEAN=1 starts from nothing, as a fresh machine does.
#   - DEB_BUILD_OPTIONS gets nocheck (dh_auto_test is empty anyway), parallel=JOBS and
#     noautodbgsym (no -dbgsym packages; KVBLK_DEB_DBGSYM=1 keeps them).
# Each debhelper step's time is in BUILD/deb/build.log ("[+N s]" prefixes).
# usage: packaging/build-deb.sh [BUILD_DIR]   (default build; JOBS: parallel jobs, default 2)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
out=$(realpath -m "${1:-$top/build}")/deb
ver=$(cat "$top/VERSION")
src=$out/kvblk-$ver
start=$(date +%s)

opts="nocheck parallel=${JOBS:-2}"
[ "${KVBLK_DEB_DBGSYM:-0}" = 1 ] || opts+=" noautodbgsym"
opts+=" ${DEB_BUILD_OPTIONS:-}"

# What the packages are built from: every file's path and bytes, and the options.
list=$(mktemp)
trap 'rm -f "$list"' EXIT
git -C "$top" ls-files -z --cached --others --exclude-standard |
	(cd "$top" && xargs -0 -r sh -c 'for f; do [ -e "$f" ] || [ -L "$f" ] && printf "%s\0" "$f"; done' sh) |
	sort -z >"$list"
key=$( { echo "$opts"; cd "$top" && xargs -0 -r sha256sum <"$list"; } | sha256sum | cut -d' ' -f1)
debs=(kvblk-dkms_"$ver"_all libkvblk0_"$ver"_amd64 libkvblk-dev_"$ver"_amd64
	kvblk-tools_"$ver"_amd64 python3-kvblk_"$ver"_amd64)
have_debs() { local d; for d in "${debs[@]}"; do [ -f "$out/$d.deb" ] || return 1; done; }
if [ "${KVBLK_DEB_FORCE:-0}" != 1 ] && [ "$(cat "$out/source.sha256" 2>/dev/null)" = "$key" ] && have_debs; then
	echo "deb: up to date (same sources and options as the packages in $out; KVBLK_DEB_FORCE=1 rebuilds)"
	exit 0
fi
rm -f "$out/source.sha256"

if [ "${KVBLK_DEB_CLEAN:-0}" = 1 ] || [ ! -d "$src" ]; then
	rm -rf "$out"
	mkdir -p "$src"
	how=clean
else
	# Keep CMake's build directory only; everything else comes again from the checkout.
	find "$out" -mindepth 1 -maxdepth 1 ! -name "kvblk-$ver" -exec rm -rf {} +
	find "$src" -mindepth 1 -maxdepth 1 ! -name 'obj-*' -exec rm -rf {} +
	how=incremental
fi
# --preserve=timestamps: an unchanged file keeps its old mtime, so ninja leaves its objects.
(cd "$top" && xargs -0 -r cp --parents -P --preserve=timestamps -t "$src" <"$list")
cd "$src"
echo "deb: building kvblk $ver in $src ($how; DEB_BUILD_OPTIONS=$opts)"
rc=0
nc=()
[ "$how" = clean ] || nc=(-nc)
DEB_BUILD_OPTIONS="$opts" dpkg-buildpackage -b -us -uc "${nc[@]}" 2>&1 |
	while IFS= read -r line; do printf '[+%d s] %s\n' $(( $(date +%s) - start )) "$line"; done \
	>"$out/build.log" || rc=$?
if [ "$rc" -ne 0 ]; then
	tail -n 60 "$out/build.log" >&2
	echo "deb: dpkg-buildpackage FAILED (log: $out/build.log)" >&2
	exit 1
fi
built=$(date +%s)
cd "$out"
ls -1 ./*.deb
echo "deb: lintian"
rc=0
lintian --fail-on error --info --display-level '>=warning' ./*.changes >"$out/lintian.log" 2>&1 || rc=$?
cat "$out/lintian.log"
echo "deb: $(grep -c '^E:' "$out/lintian.log" || true) errors, $(grep -c '^W:' "$out/lintian.log" || true) warnings (lintian.log); build $((built - start)) s, lintian $(( $(date +%s) - built )) s"
[ "$rc" -ne 0 ] || echo "$key" >"$out/source.sha256"
exit $rc
