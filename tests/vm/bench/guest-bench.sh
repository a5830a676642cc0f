#!/bin/bash
# SPDX-License-Identifier: MIT
# In the guest (tests/vm/bench/bench.list): kmod vs uring vs uring_cmd load_many through
# kvblk-bench, against fio searched for its best, all at one command size on one namespace.
#
#   kvblk-bench --device writes its store onto the namespace once (the VM's disk is a
#   throw-away snapshot). Then KVBLK_BENCH_REPEAT interleaved rounds, each: one kvblk-bench
#   pass of kmod, uring and uring_cmd (every load verified byte for byte), then every point
#   of the fio search: io_uring on the block device and io_uring_cmd on the generic char
#   device, fixedbufs 0/1, numjobs 1..W (the threads the kvblk legs use), iodepth
#   geometric. table.py takes medians over the rounds.
#   kvblk.ko gets max_cmd_bytes = the command size and max_inflight = the queue depth.
#
# Settings (environment, passed through by run.sh): KVBLK_BENCH_QD (32), KVBLK_BENCH_CMD
# (131072 bytes), KVBLK_BENCH_OBJECTS (48), KVBLK_BENCH_OBJECT_MIB (16), KVBLK_BENCH_BATCH
# (objects per load_many call, 16), KVBLK_BENCH_REPEAT (rounds, 3), KVBLK_BENCH_FIO_QDS
# (fio iodepths, "8 16 32 64 128"; QD is added), KVBLK_BENCH_PERF (1: also the load path
# alone per backend with build/kvblk_loadloop (tests/vm/bench/loadloop.c), whole-guest CPU,
# and perf profiles). Output:
# table.txt and the raw JSON in $KVBLK_VM_CASE_DIR.
. "$(dirname "$0")/../cases/lib.sh"
set +e

qd=${KVBLK_BENCH_QD:-32}
cmd=${KVBLK_BENCH_CMD:-131072}
objs=${KVBLK_BENCH_OBJECTS:-48}
obj_mib=${KVBLK_BENCH_OBJECT_MIB:-16}
batch=${KVBLK_BENCH_BATCH:-16}
repeat=${KVBLK_BENCH_REPEAT:-3}
dev=${KVBLK_TEST_DEVICE:-/dev/nvme0n1}
ng=${KVBLK_TEST_NGDEV:-/dev/ng0n1}
out=${KVBLK_VM_CASE_DIR:?}
bench=${KVBLK_BENCH_BIN:-build/tools/kvblk-bench/kvblk-bench}
store=$((objs * obj_mib * 1048576))
export TMPDIR=/tmp

[ -x "$bench" ] || skip "$bench not built (make userspace)"
[ -f "${KVBLK_KO:-}" ] || skip "kvblk.ko not built (make -C kmod)"
insmod "$KVBLK_KO" max_cmd_bytes="$cmd" max_inflight="$qd" || fail "insmod $KVBLK_KO"
trap 'rmmod kvblk 2>/dev/null' EXIT

# Rounds, interleaved: in each, one kvblk-bench pass of every backend (each load verified),
# then every point of the fio search. Medians over the rounds (table.py).
#   fio search: engine io_uring (/dev/nvme0n1, O_DIRECT) and io_uring_cmd (/dev/ng0n1),
#   fixedbufs 0 and 1, numjobs 1..W (W: the threads kvblk's legs use; each job reads its
#   share of the store), iodepth geometric (KVBLK_BENCH_FIO_QDS); always with the command
#   size of the kvblk legs. The point numjobs=W, iodepth=QD is the "equal threads" one.
fio_qds=${KVBLK_BENCH_FIO_QDS:-"8 16 32 64 128"}
case " $fio_qds " in *" $qd "*) ;; *) fio_qds="$fio_qds $qd" ;; esac
fio_run() { # engine fixedbufs numjobs iodepth json
	local engine=$1 fb=$2 nj=$3 iod=$4 json=$5 file=$dev extra=(--direct=1) share
	if [ "$engine" = io_uring_cmd ]; then file=$ng extra=(--cmd_type=nvme); fi
	share=$((store / nj / cmd * cmd))
	fio --name=kvblk-vmbench --filename="$file" --readonly --rw=read --ioengine="$engine" \
		"${extra[@]}" --bs="$cmd" --iodepth="$iod" --numjobs="$nj" --offset=0 \
		--size="$share" --offset_increment="$share" --group_reporting --runtime=30 \
		--fixedbufs="$fb" --output-format=json --output="$json" >/dev/null 2>"$json.err"
	echo "fio $engine fixedbufs=$fb numjobs=$nj iodepth=$iod: exit status $?"
}
workers=1
for r in $(seq "$repeat"); do
	# The backends' order turns each round, so that no leg always runs first.
	case $((r % 3)) in
	1) order=kmod,uring,uring_cmd ;;
	2) order=uring,uring_cmd,kmod ;;
	0) order=uring_cmd,kmod,uring ;;
	esac
	echo "== round $r: kvblk-bench $order (QD $qd, $cmd-byte commands)"
	"$bench" --device "$dev" --i-know-this-overwrites -n "$objs" -s "$obj_mib" \
		--backends "$order" --qd "$qd" --cmd-size "$cmd" --batch-objects "$batch" \
		--buffer-mib 256 --no-fio --repeat 1 -q -o json \
		>"$out/kvblk-bench-$r.json" 2>"$out/kvblk-bench-$r.err"
	echo "kvblk-bench exit status $?"
	tail -n 5 "$out/kvblk-bench-$r.err"
	if [ "$r" = 1 ]; then
		# The most threads any kvblk leg used: the search's numjobs bound.
		workers=$(python3 -c 'import json,sys; print(max([r.get("workers") or 1 for r in json.load(open(sys.argv[1])).get("results", [])] or [1]))' \
			"$out/kvblk-bench-1.json" 2>/dev/null || echo 1)
		echo "kvblk legs use up to $workers thread(s): fio numjobs 1..$workers, iodepths $fio_qds"
	fi
	for eng in io_uring io_uring_cmd; do
		for fb in 0 1; do
			for nj in $(seq "$workers"); do
				for iod in $fio_qds; do
					fio_run "$eng" "$fb" "$nj" "$iod" "$out/fio-$eng-fb$fb-j$nj-qd$iod-$r.json"
				done
			done
		done
	done
done
echo "$workers $qd" >"$out/equal-threads.txt"

# Busy CPU time of the whole guest (both vCPUs: user, nice, system, irq, softirq) in USER_HZ
# ticks, context switches, and interrupts of the NVMe controller: "ticks ctxt irqs".
counters() {
	awk '/^cpu /{ t = $2 + $3 + $4 + $7 + $8 } /^ctxt /{ c = $2 } END { printf "%d %d ", t, c }' /proc/stat
	awk '/nvme/{ for (i = 2; i <= NF && $i ~ /^[0-9]+$/; i++) n += $i } END { print n + 0 }' /proc/interrupts
}
# Difference of two counters() lines.
delta() { echo "$1 $2" | awk '{ print $4 - $1, $5 - $2, $6 - $3 }'; }

if [ "${KVBLK_BENCH_PERF:-1}" = 1 ]; then
	# The load path alone (kvblk_loadloop: no store writes, no verification) and fio
	# io_uring_cmd, 3 s each, legs alternating, KVBLK_BENCH_REPEAT rounds: GB/s, busy guest
	# CPU per GB, context switches and NVMe interrupts per MiB; then one perf profile per
	# backend (where that CPU goes).
	echo "== load path alone (kvblk_loadloop)"
	loadloop=$(dirname "$bench")/../../kvblk_loadloop
	loop() { # backend seconds
		"$loadloop" "$dev" "$1" "$store" \
			$((obj_mib << 20)) "$batch" "$qd" "$cmd" "$2"
	}
	for r in $(seq "$repeat"); do
		for b in kmod uring uring_cmd; do
			c0=$(counters)
			loop "$b" 3 | tee "$out/loadloop-$b-$r.txt"
			delta "$c0" "$(counters)" >"$out/busy-$b-$r.txt"
		done
		c0=$(counters)
		fio --name=loop --filename="$ng" --readonly --rw=read --ioengine=io_uring_cmd --cmd_type=nvme \
			--bs="$cmd" --iodepth="$qd" --numjobs=1 --offset=0 --size="$store" --fixedbufs=1 \
			--time_based --runtime=3 --output-format=json --output="$out/loadloop-fio-io_uring_cmd-$r.json" \
			>/dev/null 2>&1
		delta "$c0" "$(counters)" >"$out/busy-fio-io_uring_cmd-$r.txt"
	done
	if command -v perf >/dev/null; then
		for b in kmod uring uring_cmd; do
			# The whole kvblk_loadloop run, its start (buffer memset,
			# registration) included: a 2 s window of `perf record -a -- sleep 2`
			# beside a running loop caught a mostly idle guest (58% and 86% in the halt loop, no
			# sample of the loop) in two runs on 2026-12-01.
			perf record -q -a -g -o "$out/perf-$b.data" -- \
				"$loadloop" "$dev" "$b" "$store" \
				$((obj_mib << 20)) "$batch" "$qd" "$cmd" 3 >/dev/null 2>&1
			perf report -i "$out/perf-$b.data" --no-children --sort sym -g none --stdio 2>/dev/null |
				grep -v '^#' | grep -v '^$' | head -n 40 >"$out/perf-$b-top.txt"
			# Shares of the samples (both vCPUs, idle included) per module/binary: the
			# module's own share of the busy CPU (table.py).
			perf report -i "$out/perf-$b.data" --no-children --sort dso -g none --stdio 2>/dev/null |
				grep -v '^#' | grep -v '^$' | head -n 20 >"$out/perf-$b-dso.txt"
			rm -f "$out/perf-$b.data"
		done
	fi
fi

python3 "$(dirname "$0")/table.py" "$out" >"$out/table.txt"
rc=$?
cat "$out/table.txt"
exit $rc
