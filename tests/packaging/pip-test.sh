#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The kvblk Python package installs with pip from a fresh clone, without the network
# (pyproject.toml, setup.py; docs/install.md "Into a virtual environment"):
#
#   tree    git clone of SRC's HEAD into a temp dir; venv A (--system-site-packages);
#           A/bin/pip install --no-build-isolation --no-index CLONE (this tree's libkvblk is
#           built and bundled); from outside both trees: import kvblk, load a file byte-exact
#           through the API and through `python3 -m kvblk load --verify`; then `pip wheel` of
#           the same clone (CMake's build folder is kept: nothing compiles again), and that
#           wheel installed into a second venv B, which does the same checks: the extension
#           and libkvblk.so.0 are B's own, inside its site-packages.
#   system  the same clone built with KVBLK_LIBKVBLK=system against BUILD's libkvblk staged
#           by `cmake --install` (pkg-config through PKG_CONFIG_PATH): only the extension is
#           compiled, nothing is bundled, and the extension uses the staged library.
#
# usage: pip-test.sh tree|system SRC_DIR BUILD_DIR
# Jobs: CMAKE_BUILD_PARALLEL_LEVEL (ctest sets 2). Needs python3-venv, python3-setuptools,
# python3-wheel, python3-pip, pybind11-dev, python3-numpy (scripts/install-deps.sh user).
set -euo pipefail
mode=${1:?usage: pip-test.sh tree|system SRC BUILD}
src=${2:?usage: pip-test.sh tree|system SRC BUILD}
build=${3:?usage: pip-test.sh tree|system SRC BUILD}
py=${KVBLK_TEST_PYTHON:-/usr/bin/python3}
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2}
# Packaging is under test, not the optimiser: no -O2 halves the compile (setup.py's default is
# Release).
export KVBLK_CMAKE_ARGS=${KVBLK_CMAKE_ARGS--DCMAKE_BUILD_TYPE=None}
export PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1
unset PYTHONPATH KVBLK_LIBKVBLK

work=$(mktemp -d /var/tmp/kvblk-pip-test.XXXXXX)
trap 'rm -rf "$work"' EXIT
t_start=$(date +%s)
step() { echo "pip-test ($mode, $(($(date +%s) - t_start)) s): $*"; }
fail() { echo "FAIL: $*" >&2; exit 1; }

step "git clone $src"
git clone -q --no-local "$src" "$work/src"
git -C "$work/src" log -1 --format='  at %h %s'

# A file of random bytes whose size is no multiple of 4096: the last bytes need the
# unaligned path.
data=$work/data.bin
head -c $((8 << 20)) /dev/urandom >"$data"
head -c 1234 /dev/urandom >>"$data"

# check VENV EXPECT_LIBKVBLK: import kvblk from a folder outside both trees and load $data.
check() {
	local venv=$1 expect=$2
	(cd "$work" && "$venv/bin/python" - "$data" "$venv" "$expect" "$src" "$work/src") <<'EOF'
import os, sys
data, venv, expect, src, clone = sys.argv[1:]
import kvblk
pkg = os.path.realpath(os.path.dirname(kvblk.__file__))
assert pkg.startswith(os.path.realpath(venv) + "/"), f"kvblk imported from {pkg}, not {venv}"
for tree in (src, clone):
    assert not pkg.startswith(os.path.realpath(tree) + "/"), f"kvblk imported from the tree {pkg}"
from kvblk import _build_info
assert _build_info.LIBKVBLK == expect, (_build_info.LIBKVBLK, _build_info.REASON)
maps = open("/proc/self/maps").read().split("\n")
libs = sorted({l.split()[-1] for l in maps if "libkvblk.so" in l})
assert len(libs) == 1, libs
if expect == "tree":
    assert libs[0] == os.path.join(pkg, "libkvblk.so.0"), f"libkvblk from {libs[0]}, not the bundled one"
else:
    assert os.path.dirname(libs[0]) == _build_info.LIBKVBLK_AT, (libs, _build_info.LIBKVBLK_AT)
want = open(data, "rb").read()
size = len(want)
aligned = size - size % 4096
with kvblk.open(data) as dev:
    dst = kvblk.aligned_empty(size)
    b = dev.load_many([(0, aligned, dst[:aligned])])
    assert b.ok == 1 and b.bytes == aligned, b
    b = dev.load_many([(aligned, size - aligned, dst[aligned:])], unaligned=True)
    assert b.bytes == size - aligned, b
    assert dst.tobytes() == want, "loaded bytes differ from the file"
print(f"  {venv}: kvblk {kvblk.__version__} from {pkg}, libkvblk {libs[0]}: {size} bytes byte-exact")
EOF
	(cd "$work" && "$venv/bin/python" -m kvblk load "$data" --verify --out "$work/out.bin")
	cmp "$data" "$work/out.bin" || fail "python3 -m kvblk load --out wrote different bytes"
	(cd "$work" && "$venv/bin/python" -m kvblk info "$data" >"$work/info.txt")
	grep -q "^libkvblk   $expect" "$work/info.txt" || { cat "$work/info.txt" >&2; fail "info does not say $expect"; }
	(cd "$work" && "$venv/bin/python" -m kvblk bench "$data" --object-size 64K --batch 8 --seconds 0.2 --json \
		>"$work/bench.json")
	"$py" -c 'import json,sys; r=json.load(open(sys.argv[1])); assert r["calls"] >= 1 and r["gb_per_s"] > 0, r' \
		"$work/bench.json"
}

case $mode in
tree)
	step "venv A; pip install --no-build-isolation (builds libkvblk and the extension)"
	"$py" -m venv --system-site-packages "$work/A"
	"$work/A/bin/pip" install -q --no-build-isolation "$work/src" >"$work/install.log" 2>&1 ||
		{ tail -n 60 "$work/install.log" >&2; fail "pip install"; }
	check "$work/A" tree
	step "pip wheel of the same clone"
	"$work/A/bin/pip" wheel -q --no-build-isolation --no-deps -w "$work/dist" "$work/src" \
		>"$work/wheel.log" 2>&1 || { tail -n 60 "$work/wheel.log" >&2; fail "pip wheel"; }
	whl=$(ls "$work"/dist/kvblk-*.whl)
	# Listed into a file first: under pipefail, grep -q closing the pipe at its first match
	# kills zipfile with SIGPIPE (BrokenPipeError) and fails the check (CI, stop 37).
	"$py" -m zipfile -l "$whl" >"$work/wheel-list.txt" || fail "zipfile -l $whl"
	grep -q 'kvblk/libkvblk.so.0' "$work/wheel-list.txt" || fail "the wheel bundles no libkvblk.so.0"
	step "venv B; pip install $(basename "$whl")"
	"$py" -m venv --system-site-packages "$work/B"
	"$work/B/bin/pip" install -q "$whl" >"$work/install-b.log" 2>&1 ||
		{ cat "$work/install-b.log" >&2; fail "pip install of the wheel"; }
	rm -rf "$work/A" # B must not lean on anything of A's
	check "$work/B" tree
	;;
system)
	stage=$work/stage
	step "cmake --install $build into a stage"
	cmake --install "$build" --prefix "$stage" >"$work/stage.log"
	pcdir=$(dirname "$(find "$stage" -name kvblk.pc | head -n 1)")
	sed -i "s|^prefix=.*|prefix=$stage|" "$pcdir/kvblk.pc"
	step "venv S; KVBLK_LIBKVBLK=system pip install (the extension only)"
	"$py" -m venv --system-site-packages "$work/S"
	KVBLK_LIBKVBLK=system PKG_CONFIG_PATH=$pcdir "$work/S/bin/pip" install -q --no-build-isolation "$work/src" \
		>"$work/install.log" 2>&1 || { tail -n 60 "$work/install.log" >&2; fail "pip install (system)"; }
	site=$("$work/S/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')
	[ ! -e "$site/kvblk/libkvblk.so.0" ] || fail "KVBLK_LIBKVBLK=system bundled libkvblk.so.0"
	! compgen -G "$work/src/build/pip/tree-*" >/dev/null || fail "KVBLK_LIBKVBLK=system built the tree's libkvblk"
	check "$work/S" system
	;;
*)
	fail "unknown mode $mode (tree or system)"
	;;
esac
step "OK"
