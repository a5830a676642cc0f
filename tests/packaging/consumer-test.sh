#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The installed libkvblk-dev works for an engine built outside this tree: `cmake --install`
# of BUILD into a staged prefix, then examples/consumer built twice against that prefix
# only (pkg-config with kvblk.pc; CMake with find_package(kvblk)), each binary run (it loads
# objects from a file and checks every byte). Also: <linux/kvblk.h> compiles from the staged
# include dir, and the staged files are the expected ones.
# usage: consumer-test.sh SRC_DIR BUILD_DIR
set -euo pipefail
src=${1:?usage: consumer-test.sh SRC BUILD}
build=${2:?usage: consumer-test.sh SRC BUILD}
work=$build/consumer-test
rm -rf "$work"
mkdir -p "$work"
stage=$work/stage
cmake --install "$build" --prefix "$stage" >"$work/install.log"

libdir=$(find "$stage" -name 'libkvblk.so.0' -printf '%h\n' | head -n 1)
pcdir=$(find "$stage" -name kvblk.pc -printf '%h\n' | head -n 1)
[ -n "$libdir" ] && [ -n "$pcdir" ] || { echo "FAIL: no libkvblk.so.0 or kvblk.pc under $stage" >&2; exit 1; }
for f in include/kvblk/kvblk.h include/kvblk/kvblk.hpp include/kvblk/kvstore.h include/kvblk/kvstore.hpp include/linux/kvblk.h; do
	[ -f "$stage/$f" ] || { echo "FAIL: $f not installed" >&2; exit 1; }
done
[ -f "$libdir/cmake/kvblk/kvblkConfig.cmake" ] && [ -f "$libdir/cmake/kvblk/kvblkConfigVersion.cmake" ] ||
	{ echo "FAIL: no CMake package config in $libdir/cmake/kvblk" >&2; exit 1; }

# pkg-config: prefix redefined to the stage (kvblk.pc's paths are relative to ${prefix}).
pc() { PKG_CONFIG_PATH=$pcdir PKG_CONFIG_LIBDIR=$pcdir pkg-config --define-variable=prefix="$stage" "$@" kvblk; }
[ "$(pc --modversion)" = "$KVBLK_VERSION" ] ||
	{ echo "FAIL: kvblk.pc version $(pc --modversion), project $KVBLK_VERSION" >&2; exit 1; }
# shellcheck disable=SC2046 # word lists on purpose
cc -Wall -Wextra -Werror -o "$work/consumer-pc" "$src/examples/consumer/consumer.c" \
	$(pc --cflags) $(pc --libs) -Wl,-rpath,"$libdir"
echo '#include <linux/kvblk.h>
int main(void) { return KVBLK_API_VERSION == 0; }' >"$work/uapi.c"
# shellcheck disable=SC2046
cc -Wall -Werror -o "$work/uapi" "$work/uapi.c" $(pc --cflags)
"$work/uapi"
# Into a file first: with pipefail, grep -q closing the pipe early would fail ldd (SIGPIPE).
ldd "$work/consumer-pc" >"$work/ldd.txt"
grep -q "$libdir/libkvblk.so.0" "$work/ldd.txt" ||
	{ echo "FAIL: consumer-pc does not use the staged library" >&2; cat "$work/ldd.txt" >&2; exit 1; }
"$work/consumer-pc" "$work/store-pc.bin"

# CMake: find_package(kvblk) through CMAKE_PREFIX_PATH=stage, nothing from the source tree.
cmake -S "$src/examples/consumer" -B "$work/cmake" -G Ninja -DCMAKE_PREFIX_PATH="$stage" \
	-DCMAKE_BUILD_RPATH="$libdir" >"$work/cmake.log"
grep -q "kvblk_DIR:PATH=$libdir/cmake/kvblk" "$work/cmake/CMakeCache.txt" ||
	{ echo "FAIL: find_package(kvblk) did not use the stage" >&2; grep kvblk_DIR "$work/cmake/CMakeCache.txt" >&2; exit 1; }
cmake --build "$work/cmake" >"$work/build.log"
"$work/cmake/kvblk-consumer" "$work/store-cmake.bin"
echo "consumer-test: pkg-config and find_package(kvblk) builds against $stage: OK"
