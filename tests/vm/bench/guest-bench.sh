#!/bin/bash
# SPDX-License-Identifier: MIT
# In the guest (tests/vm/bench/bench.list): kmod vs uring vs uring_cmd load_many through
# kvblk-bench, and fio with io_uring on the block device and io_uring_cmd on the generic
# char device, all at one command size and queue depth on one namespace, in one run.
#
#   kvblk-bench --device writes its store onto the namespace (the VM's disk is a
#   throw-away snapshot), then per round: fio io_uring (its ceiling, same QD and command
#   size), then kmod, uring and uring_cmd loads, each verified byte for byte.
#   fio io_uring and io_uring_cmd are then run here with identical options, alternating.
#   kvblk.ko gets max_cmd_bytes = the command size and max_inflight = the queue depth.
#
# Settings (environment, passed through by run.sh): KVBLK_BENCH_QD (32), KVBLK_BENCH_CMD
# (131072 bytes), KVBLK_BENCH_OBJECTS (48), KVBLK_BENCH_OBJECT_MIB (16), KVBLK_BENCH_BATCH
# (objects per load_many call, 16), KVBLK_BENCH_REPEAT (5), KVBLK_BENCH_PERF (1: also
# profile the load path of each backend with perf and loadloop.py). Output: table.txt and the raw JSON in
# $KVBLK_VM_CASE_DIR.
. "$(dirname "$0")/../cases/lib.sh"
set +e

qd=${KVBLK_BENCH_QD:-32}
cmd=${KVBLK_BENCH_CMD:-131072}
objs=${KVBLK_BENCH_OBJECTS:-48}
obj_mib=${KVBLK_BENCH_OBJECT_MIB:-16}
batch=${KVBLK_BENCH_BATCH:-16}
repeat=${KVBLK_BENCH_REPEAT:-5}
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

echo "== kvblk-bench: kmod, uring, uring_cmd; fio io_uring ceiling (QD $qd, $cmd-byte commands)"
"$bench" --device "$dev" --i-know-this-overwrites -n "$objs" -s "$obj_mib" \
	--backends kmod,uring,uring_cmd --qd "$qd" --cmd-size "$cmd" --batch-objects "$batch" \
	--buffer-mib 256 --fio-qd "$qd" --repeat "$repeat" -q -o json \
	>"$out/kvblk-bench.json" 2>"$out/kvblk-bench.err"
echo "kvblk-bench exit status $?"
tail -n 5 "$out/kvblk-bench.err"

# fio with identical options but for the engine and the file.
fio_run() { # engine file json
	local engine=$1 file=$2 json=$3 extra=()
	if [ "$engine" = io_uring_cmd ]; then extra=(--cmd_type=nvme); else extra=(--direct=1); fi
	fio --name=kvblk-vmbench --filename="$file" --readonly --rw=read --ioengine="$engine" \
		"${extra[@]}" --bs="$cmd" --iodepth="$qd" --numjobs=1 --offset=0 --size="$store" \
		--runtime=30 --fixedbufs=1 --output-format=json --output="$json" >/dev/null 2>"$json.err"
	echo "fio $engine: exit status $?"
}
for r in $(seq "$repeat"); do
	fio_run io_uring "$dev" "$out/fio-io_uring-$r.json"
	fio_run io_uring_cmd "$ng" "$out/fio-io_uring_cmd-$r.json"
done

# Busy CPU time of the whole guest (both vCPUs: user, nice, system, irq, softirq) in USER_HZ
# ticks, context switches, and interrupts of the NVMe controller: "ticks ctxt irqs".
counters() {
	awk '/^cpu /{ t = $2 + $3 + $4 + $7 + $8 } /^ctxt /{ c = $2 } END { printf "%d %d ", t, c }' /proc/stat
	awk '/nvme/{ for (i = 2; i <= NF && $i ~ /^[0-9]+$/; i++) n += $i } END { print n + 0 }' /proc/interrupts
}
# Difference of two counters() lines.
delta() { echo "$1 $2" | awk '{ print $4 - $1, $5 - $2, $6 - $3 }'; }

if [ "${KVBLK_BENCH_PERF:-1}" = 1 ]; then
	# The load path alone (loadloop.py: no store writes, no verification) and fio
	# io_uring_cmd, 3 s each, legs alternating, KVBLK_BENCH_REPEAT rounds: GB/s, busy guest
	# CPU per GB, context switches and NVMe interrupts per MiB; then one perf profile per
	# backend (where that CPU goes).
	echo "== load path alone (loadloop.py)"
	lib=$(dirname "$bench")/../../libkvblk/libkvblk.so
	loop() { # backend seconds
		python3 "$(dirname "$0")/loadloop.py" "$lib" "$dev" "$1" "$store" \
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
			perf record -q -a -g -o "$out/perf-$b.data" -- \
				python3 "$(dirname "$0")/loadloop.py" "$lib" "$dev" "$b" "$store" \
				$((obj_mib << 20)) "$batch" "$qd" "$cmd" 3 >/dev/null 2>&1
			perf report -i "$out/perf-$b.data" --no-children --sort sym -g none --stdio 2>/dev/null |
				grep -v '^#' | grep -v '^$' | head -n 40 >"$out/perf-$b-top.txt"
			rm -f "$out/perf-$b.data"
		done
	fi
fi

python3 "$(dirname "$0")/table.py" "$out" >"$out/table.txt"
rc=$?
cat "$out/table.txt"
exit $rc
