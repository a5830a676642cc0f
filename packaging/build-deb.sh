#!/bin/bash
# SPDX-License-Identifier: MIT
#
# make deb: the binary packages (debian/) built from a copy of this checkout's files (git's
# tracked and untracked-but-not-ignored ones, as they are now) in BUILD/deb/kvblk-VERSION, so
# the .debs land in BUILD/deb/ and the checkout stays clean; then lintian on every package:
# any error fails, warnings are printed.
# usage: packaging/build-deb.sh [BUILD_DIR]   (default build; JOBS: parallel jobs)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
out=$(realpath -m "${1:-$top/build}")/deb
ver=$(sed -n 's/^project(kvblk VERSION \([0-9.]*\).*/\1/p' "$top/CMakeLists.txt")
src=$out/kvblk-$ver
start=$(date +%s)

rm -rf "$out"
mkdir -p "$src"
git -C "$top" ls-files -z --cached --others --exclude-standard |
	(cd "$top" && xargs -0 cp --parents -P -t "$src" 2>/dev/null || true)
# Files deleted in the work tree but still in the index are skipped by cp above: fine.
cd "$src"
echo "deb: building kvblk $ver in $src"
DEB_BUILD_OPTIONS="parallel=${JOBS:-2} ${DEB_BUILD_OPTIONS:-}" \
	dpkg-buildpackage -b -us -uc >"$out/build.log" 2>&1 || {
	tail -n 60 "$out/build.log" >&2
	echo "deb: dpkg-buildpackage FAILED (log: $out/build.log)" >&2
	exit 1
}
cd "$out"
ls -1 ./*.deb
echo "deb: lintian"
rc=0
lintian --fail-on error --info --display-level '>=warning' ./*.changes >"$out/lintian.log" 2>&1 || rc=$?
cat "$out/lintian.log"
echo "deb: $(grep -c '^E:' "$out/lintian.log" || true) errors, $(grep -c '^W:' "$out/lintian.log" || true) warnings (lintian.log); $(( $(date +%s) - start )) s"
exit $rc
