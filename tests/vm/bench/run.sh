#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# make vmbench: boot one VM (tests/vm/bench/bench.list: 4 KiB LBA, 128 KiB MDTS, 1 GiB
# namespace), run guest-bench.sh in it (kvblk-bench kmod/uring/uring_cmd, fio io_uring and
# io_uring_cmd at the same command size and queue depth), print the table.
# Settings: KVBLK_BENCH_QD, KVBLK_BENCH_CMD, KVBLK_BENCH_OBJECTS, KVBLK_BENCH_OBJECT_MIB,
# KVBLK_BENCH_BATCH, KVBLK_BENCH_REPEAT, KVBLK_BENCH_FIO_QDS, KVBLK_BENCH_PERF (see guest-bench.sh), and every
# KVBLK_VM_* setting of tests/vm (KVBLK_VM_MEM defaults to 3G here). Extra arguments go to
# run-suite.sh (e.g. --no-build, --variants 'lba4k:size=1G:mdts=7').
# --p2p: the P2PDMA bench instead (p2p-bench.list, guest-p2p-bench.sh: kmod into a
# controller memory buffer vs kmod and uring into host memory), on Debian's 7.2 kernel
# unless KVBLK_VM_KERNEL says otherwise.
# --engines: kvblk.ko's block-layer engine vs its PRP engine vs fio io_uring (and libkvblk
# uring with KVBLK_BENCH_URING=1) on one namespace and on md RAID-0 of 4 (engines-bench.list,
# guest-engines-bench.sh; KVBLK_BENCH_SECS seconds per leg).
# --cpu: the software cost per command and per byte on null_blk (cpu-bench.list,
# guest-cpu-bench.sh: kvblk.ko ioctl and uring_cmd, libkvblk uring and threadpool, fio
# io_uring at three points; one and two guest CPUs; KVBLK_BENCH_SIZES, _MB, _CPUS).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
cd "$repo" || exit 2
export KVBLK_VM_MEM=${KVBLK_VM_MEM:-3G}
list=$here/bench.list script=tests/vm/bench/guest-bench.sh table_path='*/cases/vmbench.d/table.txt'
if [ "${1:-}" = --engines ]; then
	shift
	list=$here/engines-bench.list script=tests/vm/bench/guest-engines-bench.sh
	table_path='*/cases/engbench.d/engines-table.txt'
elif [ "${1:-}" = --cpu ]; then
	shift
	list=$here/cpu-bench.list script=tests/vm/bench/guest-cpu-bench.sh
	table_path='*/cases/cpubench.d/cpu-table.txt'
elif [ "${1:-}" = --p2p ]; then
	shift
	list=$here/p2p-bench.list script=tests/vm/bench/guest-p2p-bench.sh
	table_path='*/cases/p2pbench.d/p2p-table.txt'
	export KVBLK_VM_KERNEL=${KVBLK_VM_KERNEL:-7.2}
fi

# The guest gets the case's environment from the harness only; pass the bench settings
# through the manifest command line.
manifest=$(mktemp /tmp/kvblk-vmbench.XXXXXX.list)
trap 'rm -f "$manifest"' EXIT
envs=
for v in KVBLK_BENCH_QD KVBLK_BENCH_CMD KVBLK_BENCH_OBJECTS KVBLK_BENCH_OBJECT_MIB \
	 KVBLK_BENCH_BATCH KVBLK_BENCH_REPEAT KVBLK_BENCH_FIO_QDS KVBLK_BENCH_PERF KVBLK_BENCH_SECS KVBLK_BENCH_URING KVBLK_BENCH_HUGE KVBLK_BENCH_NOMERGES \
	 KVBLK_BENCH_SIZES KVBLK_BENCH_MB KVBLK_BENCH_CPUS KVBLK_BENCH_PERF_MAX KVBLK_BENCH_LEGS KVBLK_BENCH_PRUNE KVBLK_BENCH_PIN; do
	[ -n "${!v:-}" ] && envs+="$v='${!v}' "
done
sed "s|$script|${envs}$script|" "$list" >"$manifest"

log=$(mktemp /tmp/kvblk-vmbench.XXXXXX.log)
tests/vm/run-suite.sh --manifest "$manifest" "$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
runs=$(sed -n 's/^vmtest: logs: //p' "$log" | tail -n 1)
rm -f "$log"
table=$(find "$runs" -path "$table_path" 2>/dev/null | head -n 1)
echo
if [ -n "$table" ]; then
	cat "$table"
	echo "(raw results: $(dirname "$table"))"
else
	echo "vmbench: no table (see $runs)"
	rc=1
fi
exit "$rc"
