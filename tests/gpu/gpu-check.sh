#!/bin/bash
# SPDX-License-Identifier: MIT
# GPU check of kvblk's staged path (tests/gpu/README.md): build libkvblk and gpu_check from
# this checkout, then load N objects from a file into GPU memory and into host memory,
# verify both, print GB/s. Exit: 0 passed, 1 a check failed, 2 setup/build problem,
# 4 skipped (no CUDA runtime or no GPU).
#
#   tests/gpu/gpu-check.sh [--build-dir DIR] [gpu_check options...]
#
# --build-dir DIR: use a build tree that already has tests/gpu/gpu_check (else the script
# configures and builds build-gpu/ next to this checkout's sources: libkvblk and gpu_check
# only, no test or tool dependencies). Other options go to gpu_check (--objects N,
# --object-mib M, --backend B, --reps R, --staging BUFFERS:MIB, --file PATH, --keep).
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=""
if [ "${1:-}" = "--build-dir" ]; then
	build=$2
	shift 2
fi

die() {
	echo "gpu-check: $*" >&2
	exit 2
}

if [ -z "$build" ]; then
	build="$root/build-gpu"
	missing=()
	command -v cmake >/dev/null || missing+=("cmake (>= 3.20)")
	command -v pkg-config >/dev/null || missing+=("pkg-config")
	cxx=${CXX:-}
	if [ -z "$cxx" ]; then
		for c in g++ clang++ c++; do
			command -v $c >/dev/null && { cxx=$c; break; }
		done
	fi
	[ -n "$cxx" ] || missing+=("a C++20 compiler (g++ >= 10)")
	command -v make >/dev/null || command -v ninja >/dev/null || missing+=("make")
	if command -v pkg-config >/dev/null && ! pkg-config --exists liburing; then
		missing+=("liburing (headers and liburing.pc: liburing-dev)")
	fi
	if [ ${#missing[@]} -gt 0 ]; then
		printf 'gpu-check: cannot build libkvblk here; missing:\n' >&2
		printf '  - %s\n' "${missing[@]}" >&2
		echo "gpu-check: Debian/Ubuntu: apt-get install cmake g++ make pkg-config liburing-dev" >&2
		exit 2
	fi
	if command -v cmake >/dev/null; then
		v=$(cmake --version | awk 'NR==1 {print $3}')
		[ "$(printf '%s\n3.20\n' "$v" | sort -V | head -1)" = "3.20" ] || die "cmake $v is older than 3.20"
	fi
	echo "gpu-check: building libkvblk and gpu_check in $build"
	mkdir -p "$build" || die "cannot create $build"
	log="$build/gpu-check-build.log"
	CXX=$cxx cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DKVBLK_WITH_TOOLS=OFF \
		-DBUILD_TESTING=OFF -DKVBLK_WERROR=OFF >"$log" 2>&1 ||
		{ tail -30 "$log" >&2; die "cmake configure failed (log: $log)"; }
	cmake --build "$build" -j"$(nproc)" --target gpu_check >>"$log" 2>&1 ||
		{ tail -30 "$log" >&2; die "build failed (log: $log)"; }
fi
prog="$build/tests/gpu/gpu_check"
[ -x "$prog" ] || die "$prog not found (build it: cmake --build $build --target gpu_check)"

# A CUDA runtime outside the loader's path (toolkit, pip wheel): tell libkvblk where it is.
if [ -z "${KVBLK_CUDART:-}" ] && ! /sbin/ldconfig -p 2>/dev/null | grep -q 'libcudart\.so'; then
	for f in /usr/local/cuda/lib64/libcudart.so.* /usr/local/cuda-*/lib64/libcudart.so.* \
		/usr/lib/x86_64-linux-gnu/libcudart.so.* \
		/usr/local/lib/python3*/dist-packages/nvidia/cuda_runtime/lib/libcudart.so.* \
		/usr/lib/python3/dist-packages/nvidia/cuda_runtime/lib/libcudart.so.* \
		"$HOME"/.local/lib/python3*/site-packages/nvidia/cuda_runtime/lib/libcudart.so.*; do
		if [ -f "$f" ]; then
			export KVBLK_CUDART=$f
			echo "gpu-check: using $f (KVBLK_CUDART)"
			break
		fi
	done
fi
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | sed 's/^/gpu-check: gpu: /'
[ -e /dev/kvblk ] && echo "gpu-check: /dev/kvblk present (kvblk.ko loaded): --backend kmod tries the P2P path"
"$prog" "$@"
