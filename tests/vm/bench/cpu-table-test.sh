#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Checks the table and goal verdicts of make vmbench-cpu (cpu-table.py) on raw lines whose
# figures are known:
#   - IOPS per CPU second = (bytes / CMD) / busy_s, busy = busy_s / wall_s, tick =
#     tick_busy_s / wall_s, the median of the rounds;
#   - kvblk.ko ioctl against the best baseline point (fio's and the bare io_uring loop's)
#     that ran every round: pass at >= 1.0x, MISS below (and a line in the misses file),
#     above 1.05x "pass, above every userspace point" (and a line in the above file);
#     libkvblk above 1.05x "open: ceiling not found"; b2 (the loop at the batch's depth, a
#     deeper queue) is no baseline, however high; a point pruned after round 1 does not compete,
#     however high, nor does one that failed in some round (b1 at 1 MiB: 1,237 per CPU s in
#     round 1, failed in round 2); a bare io_uring point above fio's best is the best;
#   - the pipeline against libkvblk uring's blocking calls, 0.95x;
#   - a raw line of before 2026-12-06 (no tick_busy_s) prints "-" for tick.
# Run by ctest (vm_cpu_table); needs python3 only.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
expect_line() { # description regex
	if grep -Eq -- "$2" "$tmp/table.txt"; then
		echo "ok: $1"
	else
		echo "FAIL: $1: no line matches /$2/"
		fails=$((fails + 1))
	fi
}
expect_file() { # description file content
	if [ "$(cat "$2")" = "$3" ]; then
		echo "ok: $1"
	else
		echo "FAIL: $1:"; cat "$2"
		fails=$((fails + 1))
	fi
}
# round mb cmd qd cpus leg reqs bytes busy_s wall_s [tick_busy_s]; 4 KiB commands.
# kioctl: 100,000 I/Os per 1.0 CPU s (round 1 half the I/Os in half the busy time: its IOPS and busy are lower, the medians not).
# f4: 96,000 per CPU s; f2: pruned after round 1 at 200,000; b1 (bare io_uring) 98,000, the
# best; b0 pruned after round 1.
# luring 90,000 (0.918x b1: MISS, 0.9375x f4); lpipe 81,000 (0.9x luring: MISS).
cat >"$tmp/raw.txt" <<'RAW'
1 0 4096 32 2 kioctl 50000 204800000 0.500 0.800 0.70
2 0 4096 32 2 kioctl 100000 409600000 1.000 0.800 0.90
3 0 4096 32 2 kioctl 100000 409600000 1.000 0.800 0.80
1 0 4096 32 2 f4 96000 393216000 1.000 0.800 1.00
2 0 4096 32 2 f4 96000 393216000 1.000 0.800 1.00
3 0 4096 32 2 f4 96000 393216000 1.000 0.800 1.00
1 0 4096 32 2 f2 200000 819200000 1.000 0.800 1.00
2 0 4096 32 2 f2 pruned
3 0 4096 32 2 f2 pruned
1 0 4096 32 2 b1 98000 401408000 1.000 0.800 1.00
2 0 4096 32 2 b1 98000 401408000 1.000 0.800 1.00
3 0 4096 32 2 b1 98000 401408000 1.000 0.800 1.00
1 0 4096 32 2 b0 60000 245760000 1.000 0.800 1.00
2 0 4096 32 2 b0 pruned
3 0 4096 32 2 b0 pruned
1 0 4096 32 2 luring 90000 368640000 1.000 0.800 1.00
2 0 4096 32 2 luring 90000 368640000 1.000 0.800 1.00
3 0 4096 32 2 luring 90000 368640000 1.000 0.800 1.00
1 0 4096 32 2 lpipe 81000 331776000 1.000 0.800 1.20
2 0 4096 32 2 lpipe 81000 331776000 1.000 0.800 1.20
3 0 4096 32 2 lpipe 81000 331776000 1.000 0.800 1.20
1 0 1048576 4 1 kioctl 800 838860800 0.800 0.800
1 0 1048576 4 1 f4 700 734003200 0.800 0.800
1 0 1048576 4 1 luring 600 629145600 0.800 0.800
1 0 1048576 4 1 b1 990 1038090240 0.800 0.800
2 0 1048576 4 1 b1 fail
1 0 131072 8 2 kioctl 1010 132382720 1.000 1.000 1.00
1 0 131072 8 2 b1 900 117964800 1.000 1.000 1.00
1 0 131072 8 2 b2 2000 262144000 1.000 1.000 1.00
1 0 131072 8 2 luring 950 124518400 1.000 1.000 1.00
RAW
python3 "$here/cpu-table.py" "$tmp/raw.txt" 0.8 3 test "$tmp/misses.txt" "$tmp/above.txt" >"$tmp/table.txt"
cat "$tmp/table.txt"
expect_line "kioctl: median IOPS per CPU s, busy, tick, rounds" \
	'^mb=0 4 KiB +32 +2  kvblk.ko ioctl +100000 +0\.410 +125000 +1\.25  1\.00 +1\.00  100000 100000 100000$'
expect_line "f2 pruned after round 1" 'fio f2 \(batch QD/2\) +200000 .*\(pruned after round 1\)$'
expect_line "b0 pruned after round 1" 'bare io_uring +60000 .*\(pruned after round 1\)$'
expect_line "kioctl against b1, above f4, not the pruned f2: pass" \
	'goal kvblk.ko ioctl +>= 1\.00x: 1\.020x best baseline \(b1\): pass$'
expect_line "luring against b1: MISS" 'goal libkvblk uring +>= 0\.95x: 0\.918x best baseline \(b1\): MISS$'
expect_line "pipeline: MISS" 'goal libkvblk pipeline >= 0\.95x libkvblk uring .*: 0\.900x: MISS$'
expect_line "old raw line: tick -" '^mb=0 1 MiB +4 +1  kvblk.ko ioctl +1000 +1\.049 +1000 +1\.00 +- +1\.00  1000$'
expect_line "1 MiB: kioctl above 1.05x f4: pass, above every userspace point" \
	'goal kvblk.ko ioctl +>= 1\.00x: 1\.143x best baseline \(f4\): pass, above every userspace point \(no io_uring request, no VFS read per I/O\)$'
expect_line "128 KiB: kioctl above b1, b2 no baseline" \
	'goal kvblk.ko ioctl +>= 1\.00x: 1\.122x best baseline \(b1\): pass, above every userspace point'
expect_line "128 KiB: luring above 1.05x b1: open" \
	'goal libkvblk uring +>= 0\.95x: open: ceiling not found \(> 1\.05x the best baseline point, b1: no ratio\)$'
expect_line "1 MiB: luring 0.857x: MISS" 'goal libkvblk uring +>= 0\.95x: 0\.857x best baseline \(f4\): MISS$'
expect_file "misses file" "$tmp/misses.txt" $'0 4096 32 2 luring b1\n0 4096 32 2 lpipe luring\n0 1048576 4 1 luring f4'
expect_file "above file" "$tmp/above.txt" $'0 131072 8 2 kioctl b1\n0 1048576 4 1 kioctl f4'
[ "$fails" = 0 ] || { echo "$fails check(s) failed"; exit 1; }
echo "cpu-table: all checks passed"
