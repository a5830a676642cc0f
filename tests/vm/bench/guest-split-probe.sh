#!/bin/bash
# SPDX-License-Identifier: MIT
# In the guest (tests/vm/bench/split-probe.list): do io_uring reads that the block layer
# must split get issued again from io-wq worker threads? (docs/results.md, "commands the
# block layer takes unsplit"; libkvblk/bio_split.hpp.)
#
# null_blk as make vmbench-cpu loads it (memory_backed=0, 4 KiB blocks, max_sectors 1 MiB,
# nomerges 2). For each read size, fio io_uring QD 4 with fixed buffers, then libkvblk uring
# (build/kvblk_loadloop, 1 MiB objects, batches of 8, QD 4, max_cmd_bytes = the size: libkvblk
# may lower it, backend_reason says so), each for KVBLK_PROBE_SECS (1.5) seconds after 1 s
# of start-up: GB read, busy guest CPU seconds (/proc/stat), GB per CPU second, and how many
# io-wq worker threads (iou-wrk-*) the kernel had running meanwhile.
# Run: tests/vm/run-suite.sh --manifest tests/vm/bench/split-probe.list [KVBLK_VM_KERNEL=...]
. "$(dirname "$0")/../cases/lib.sh"
set +e

secs=${KVBLK_PROBE_SECS:-1.5}
loadloop=build/kvblk_loadloop
modprobe -r null_blk 2>/dev/null
modprobe null_blk nr_devices=1 queue_mode=2 gb=1 bs=4096 memory_backed=0 max_sectors=2048 \
	hw_queue_depth=128 || fail "modprobe null_blk"
trap 'modprobe -r null_blk 2>/dev/null' EXIT
for _ in $(seq 50); do [ -b /dev/nullb0 ] && break; sleep 0.1; done
q=/sys/block/nullb0/queue
echo 2 >$q/nomerges
echo "guest $(uname -r): null_blk max_sectors_kb $(cat $q/max_sectors_kb)," \
	"max_segments $(cat $q/max_segments), max_segment_size $(cat $q/max_segment_size)"

busy() { awk '/^cpu /{ print $2 + $3 + $4 + $7 + $8 }' /proc/stat; }
sectors() { awk '{ print $3 }' /sys/block/nullb0/stat; }
workers() { cat /proc/[0-9]*/task/*/comm 2>/dev/null | grep -c '^iou-wrk'; }
hz=$(getconf CLK_TCK)
measure() { # label argv...: one window of a leg running in the background
	local label=$1 pid s0 b0 s1 b1 w
	shift
	"$@" >/tmp/split-probe.out 2>&1 &
	pid=$!
	sleep 1
	s0=$(sectors) b0=$(busy)
	sleep "$secs"
	w=$(workers)
	s1=$(sectors) b1=$(busy)
	kill -TERM $pid 2>/dev/null
	wait $pid 2>/dev/null
	awk -v l="$label" -v s=$((s1 - s0)) -v b=$((b1 - b0)) -v hz="$hz" -v w="$w" 'BEGIN {
		gb = s * 512 / 1e9; cpu = b / hz; per = (cpu > 0) ? gb / cpu : 0
		printf "%-38s %8.2f GB %6.2f CPU s %8.2f GB per CPU s, iou-wrk threads %d\n", l, gb, cpu, per, w }'
}
for bs in 1048576 524288 131072; do
	measure "fio io_uring, reads of $bs" fio --name=c --filename=/dev/nullb0 --readonly --rw=read \
		--ioengine=io_uring --direct=1 --bs="$bs" --iodepth=4 --fixedbufs=1 --registerfiles=1 \
		--gtod_reduce=1 --time_based --runtime=600 --size=512M
done
for cmd in 1048576 524288; do
	measure "libkvblk uring, max_cmd_bytes $cmd" \
		"$loadloop" /dev/nullb0 uring $((64 << 20)) 1048576 8 4 "$cmd" 600
done
