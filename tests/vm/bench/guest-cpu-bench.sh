#!/bin/bash
# SPDX-License-Identifier: MIT
# In the guest (tests/vm/bench/cpu-bench.list): the software cost of each load path per
# command and per byte, on null_blk, where the device costs nothing.
#
#   Device: null_blk (blk-mq, 4 KiB blocks, 1 GiB, completions in softirq, the
#   default irqmode, max_sectors 1 MiB), queue/nomerges = 2 (every I/O one request, for
#   every path alike). memory_backed=0: reads move no bytes (no data check possible);
#   memory_backed=1: reads copy from the device's pages, which are written with random
#   bytes first, and the first batch of each kvblk/libkvblk leg is compared with pread.
#   Sizes (KVBLK_BENCH_SIZES, "CMD:QD:BATCH ..."): 4 KiB QD 32, 128 KiB QD 8, 1 MiB QD 4;
#   objects of one command each, BATCH per call (two queue depths' worth). With
#   memory_backed=1 only the sizes where moving bytes weighs (KVBLK_BENCH_MB1_SIZES: 128 KiB
#   and 1 MiB; at 4 KiB the per-command cost is mb=0's).
#   Legs: kvblk.ko's block-layer engine through the ioctl and through uring_cmd
#   (tests/kmod-smoke/kmod_bench -H: a buffer of huge pages; module loaded with
#   max_cmd_bytes = CMD and max_inflight = QD); libkvblk uring (one ring, QD, registered buffer: fixed buffers)
#   and threadpool (QD threads) through build/kvblk_loadloop (tests/vm/bench/loadloop.c,
#   C: no interpreter in the legs' CPU time), and at memory_backed=0 the layer
#   pipeline (below); fio io_uring at four points
#   (fixedbufs, registerfiles and gtod_reduce on at all: each only removes per-I/O work;
#   gtod_reduce drops fio's clock reads and latency statistics per I/O, which no kvblk leg
#   keeps: without it several kvblk figures were above 1.05x fio's best): f1 no
#   batching, f2 iodepth_batch_submit = iodepth_batch_complete_min = QD/2, f3 f2 with
#   sqthread_poll, f4 both = QD (the whole depth submitted and reaped at once, as a libkvblk
#   batch is: without it libkvblk uring read above 1.05x fio's best per CPU in most
#   configurations of 2026-12-05 15:18 UTC) into a buffer aligned to 2 MiB (--iomem_align=2m,
#   since 2026-12-05 21:10: huge pages, as every kvblk leg's buffer is: kmod_bench -H,
#   kvblk_loadloop), and where a CMD read into a buffer of 4 KiB
#   pages needs more than null_blk's max_segments, f5: f4 laid out as libkvblk's commands
#   are, in reads no larger than null_blk takes from a fixed buffer without a split
#   (max_sectors_kb; before 6.11 also max_segments pages: libkvblk/bio_split.hpp) and a
#   buffer aligned to 2 MiB (--iomem_align=2m: whole transparent huge pages, which io_uring
#   coalesces from 6.11). io_uring issues a read that must be split again from an io-wq
#   thread, and fio's own points paid that at 1 MiB: on 6.1 every read (2026-12-05: 11.8k
#   IOPS at 1 MiB, 46.6k at 512 KiB, 4 iou-wrk threads), on 7.2 those into the small pages
#   around its malloc'd buffer (1.5-1.75 requests per read). An I/O is still CMD bytes
#   (cpu-table.py counts bytes).
#   Beside fio, the bare io_uring loop (build/kvblk_bareloop, tests/vm/bench/bareloop.c:
#   liburing and nothing else, the whole depth submitted and reaped in one io_uring_enter(),
#   registered file, SINGLE_ISSUER | DEFER_TASKRUN): b1 with fixed buffers, and where f5
#   runs, b0 without (IORING_OP_READ: the pages pinned per read, but the block layer merges
#   a huge page's 4 KiB pages into one segment, so a 1 MiB read is not split before 6.11
#   either). Since 2026-12-06: kvblk.ko ioctl was above 1.05x fio's best in 16 of 20 goal
#   lines, fio's own work per I/O (its io_u and job bookkeeping) being the difference, so
#   fio's points were no ceiling per CPU. The goals are against the best of fio's and the
#   bare loop's points. Not among them, a diagnostic (KVBLK_BENCH_LEGS): b2, b1 with BATCH
#   reads in flight and per io_uring_enter(), the reads per system call of one kvblk.ko ioctl
#   or libkvblk batch, but at a deeper queue than the configuration's QD, which every other
#   leg keeps (kvblk.ko's max_inflight, libkvblk's ring, fio's iodepth): the ioctl with
#   BATCH objects and QD in flight waits BATCH/QD times for free slots inside its one call,
#   b2 once. Run as a baseline on 2026-12-06 (10:16, docs/results.md) it read 1.2-1.4x b1
#   per CPU at 128 KiB and 1 MiB on 7.2: what a deeper queue saves, not a ceiling of QD.
#   CPUs (KVBLK_BENCH_CPUS, "2 1"): the guest's two vCPUs, or one with cpu1 offline
#   (hotplug: the kernel's own threads, io-wq workers, the SQPOLL thread and softirq
#   then share the one CPU too, as in a 1-vCPU boot; taskset would leave them the
#   other vCPU).
#   Each leg runs until killed; once its I/O flows and 0.1 s more, a window of
#   KVBLK_BENCH_SECS (0.6) seconds counts reads completed and bytes read on the null_blk
#   disk (/sys/block/X/stat) and the guest's busy CPU time (online CPUs x the window less
#   their idle and iowait time in /proc/stat, which NO_HZ measures at each idle entry and
#   exit; the tick-sampled user + nice + system + irq + softirq beside it, for comparison),
#   so that process start and teardown are outside.
#   KVBLK_BENCH_REPEAT (3) rounds, each running every leg once, legs' order turning;
#   a fio point below KVBLK_BENCH_PRUNE (0.9) of round 1's best fio point of its
#   configuration (IOPS per CPU second) leaves the search after round 1.
#   (0.8 s windows, the 0.9 prune, mb=1 at two sizes and one profile pair: the whole bench,
#   both kernels, went from about 32 to 13.6 minutes; issue 31 asks for under 15. With 1.0 s
#   windows, 0.2 s settling and two profile pairs: 16.8 minutes. 2026-12-06: 15.4 minutes with
#   0.8 s windows and no profile, so 0.6 s windows: busy time is now measured idle time, exact
#   to 10 ms of the sum, 1% of a 0.6 s window of two CPUs.)
#   Then (KVBLK_BENCH_PERF=1) a system-wide perf profile of the kvblk leg and of the
#   best baseline point of the first missed goals (KVBLK_BENCH_PERF_MAX, 1) and of the first
#   kvblk.ko line above every userspace point (KVBLK_BENCH_PERF_ABOVE, 1).
# Output: cpu-raw.txt, cpu-table.txt (tests/vm/bench/cpu-table.py), cpu-misses.txt and
# cpu-above.txt (the goal lines missed; kvblk.ko's above every userspace point), perf-*.txt
# (top symbols, comm/dso, callers, samples, I/Os in the window, and the pair per I/O) in
# $KVBLK_VM_CASE_DIR.
. "$(dirname "$0")/../cases/lib.sh"
set +e

sizes=${KVBLK_BENCH_SIZES:-"4096:32:64 131072:8:16 1048576:4:8"}
mbs=${KVBLK_BENCH_MB:-"0 1"}
cpus=${KVBLK_BENCH_CPUS:-"2 1"}
secs=${KVBLK_BENCH_SECS:-0.6}
mb1_sizes=${KVBLK_BENCH_MB1_SIZES:-"131072:8:16 1048576:4:8"}
repeat=${KVBLK_BENCH_REPEAT:-3}
store=$((64 << 20))
out=${KVBLK_VM_CASE_DIR:?}
here=tests/vm/bench
kb=tests/kmod-smoke/kmod_bench
loadloop=${KVBLK_BENCH_LOADLOOP:-build/kvblk_loadloop}
bare=${KVBLK_BENCH_BARELOOP:-build/kvblk_bareloop}
[ -x "$kb" ] || skip "$kb not built"
[ -f "${KVBLK_KO:-}" ] || skip "kvblk.ko not built"
[ -x "$loadloop" ] || skip "$loadloop not built"
[ -x "$bare" ] || skip "$bare not built"
legs_all="kioctl kuring luring ltp f1 f2 f3 f4 b1"
# KVBLK_BENCH_LEGS: only these legs (of the above, lpipe, f5, b0, and the diagnostics b1c: b1
# with libkvblk's ring setup, COOP_TASKRUN, and b2: b1 at depth BATCH), in every
# configuration; unset: all.
legs_only=${KVBLK_BENCH_LEGS:-}
# With memory_backed=0 also an engine's layer pipeline (issue 31, item 3): libkvblk uring as
# luring, two batches (layers) outstanding through kvblk_submit(), reaped when the event fd
# polls readable, each resubmitted at once: its cost per CPU second against luring's one
# blocking kvblk_load_many() per batch. Not at memory_backed=1: the bytes cost both alike.

set_cpus() { # n: cpu1 online (2) or offline (1)
	local want=$(($1 == 2))
	[ -e /sys/devices/system/cpu/cpu1/online ] || return 0
	[ "$(cat /sys/devices/system/cpu/cpu1/online)" = "$want" ] && return 0
	echo "$want" >/sys/devices/system/cpu/cpu1/online || fail "cpu1 online=$want"
}
cleanup() {
	set_cpus 2
	rmmod kvblk 2>/dev/null
	modprobe -r null_blk 2>/dev/null
}
trap cleanup EXIT

nullb() { # memory_backed -> dev
	modprobe -r null_blk 2>/dev/null
	modprobe null_blk nr_devices=1 queue_mode=2 gb=1 bs=4096 memory_backed="$1" \
		max_sectors=2048 hw_queue_depth=128 || fail "modprobe null_blk memory_backed=$1"
	dev=/dev/nullb0
	for i in $(seq 50); do [ -b $dev ] && break; sleep 0.1; done
	[ -b $dev ] || fail "no $dev"
	echo 2 >/sys/block/nullb0/queue/nomerges || fail "nomerges"
	echo "null_blk memory_backed=$1: max_hw_sectors_kb $(cat /sys/block/nullb0/queue/max_hw_sectors_kb)," \
		"max_segments $(cat /sys/block/nullb0/queue/max_segments), nr_hw_queues $(ls /sys/block/nullb0/mq | wc -l)," \
		"nomerges $(cat /sys/block/nullb0/queue/nomerges)"
	if [ "$1" = 1 ]; then
		dd if=/dev/urandom of=$dev bs=1M count=$((store >> 20)) oflag=direct status=none ||
			fail "writing the store"
	fi
}
kvblk_ko() { # cmd qd
	rmmod kvblk 2>/dev/null
	insmod "$KVBLK_KO" max_cmd_bytes="$1" max_inflight="$2" || fail "insmod $KVBLK_KO"
}
# "busy_ticks idle_ticks reads sectors" from /proc/stat and the disk's stat, without a fork
# (the start-up poll runs it every 0.1 s). busy_ticks: user + nice + system + irq + softirq,
# each charged a whole tick (10 ms) to what the CPU ran when its tick fired. idle_ticks:
# idle + iowait, which a NO_HZ kernel measures at every idle entry and exit
# (get_cpu_idle_time_us(), kernel/time/tick-sched.c; fs/proc/stat.c), in 10 ms units of the
# sum over all CPUs.
sample() {
	local c u n sy i iow irq sirq rd sec
	read -r c u n sy i iow irq sirq _ </proc/stat
	read -r rd _ sec _ </sys/block/nullb0/stat
	echo "$((u + n + sy + irq + sirq)) $((i + iow)) $rd $sec"
}
# Start a leg in the background, wait for its I/O, measure one window, kill it.
# Prints "ops bytes busy_s wall_s tick_busy_s" or "fail". busy_s is the window's online CPUs x
# wall time less the idle time (exact to 10 ms of the whole). The tick-sampled sum
# (tick_busy_s) agrees within 2% for one thread per CPU, and saw 1.16-1.24 busy CPUs of the
# layer pipeline's two threads where 1.32-1.34 were busy (6.1, 2026-12-06).
leg() { # name log argv...
	local name=$1 log=$2 pid r0 i b0 d0 rd0 s0 t0 b1 d1 rd1 s1 t1 online
	shift 2
	read -r _ _ r0 _ <<<"$(sample)"
	"$@" >"$log" 2>&1 &
	pid=$!
	for ((i = 0; i < 300; i++)); do
		kill -0 $pid 2>/dev/null || break
		read -r _ _ rd0 _ <<<"$(sample)"
		[ "$rd0" != "$r0" ] && break
		sleep 0.1
	done
	sleep 0.1
	online=$(grep -c '^cpu[0-9]' /proc/stat)
	read -r b0 d0 rd0 s0 <<<"$(sample)"
	t0=$EPOCHREALTIME
	sleep "$secs"
	read -r b1 d1 rd1 s1 <<<"$(sample)"
	t1=$EPOCHREALTIME
	if ! kill -0 $pid 2>/dev/null; then
		wait $pid
		echo "leg $name ended early (rc $?):" >&2
		tail -n 5 "$log" >&2
		echo fail
		return
	fi
	kill -TERM $pid
	wait $pid 2>/dev/null
	awk -v b="$((b1 - b0))" -v d="$((d1 - d0))" -v r="$((rd1 - rd0))" -v s="$((s1 - s0))" \
		-v t0="$t0" -v t1="$t1" -v n="$online" \
		'BEGIN { w = t1 - t0; busy = n * w - d / 100; if (busy < 0) busy = 0
			 printf "%d %.0f %.3f %.3f %.2f\n", r, s * 512, busy, w, b / 100 }'
}
# The largest read null_blk takes from an io_uring fixed buffer without a split (as
# libkvblk/bio_split.hpp computes it for libkvblk's uring commands).
unsplit_bytes() {
	local q=/sys/block/nullb0/queue lim segs maj min
	lim=$(($(cat $q/max_sectors_kb) * 1024))
	segs=$(cat $q/max_segments)
	IFS=. read -r maj min _ <<<"$(uname -r)"
	if ((maj < 6 || (maj == 6 && min < 11))) && ((segs > 0 && segs * 4096 < lim)); then
		lim=$((segs * 4096))
	fi
	echo "$lim"
}
argv_of() { # leg size qd batch mb -> argv
	local half=$(($3 / 2 > 0 ? $3 / 2 : 1)) fio
	fio=(fio --name=c --filename="$dev" --readonly --rw=read --ioengine=io_uring --direct=1
	     --bs="$2" --iodepth="$3" --size="$store" --time_based --runtime=600
	     --fixedbufs=1 --registerfiles=1 --gtod_reduce=1)
	case $1 in
	kioctl) argv=("$kb" -e bio -H "$dev" "$store" "$2" "$4" 600) ;;
	kuring) argv=("$kb" -e bio -H -u "$dev" "$store" "$2" "$4" 600) ;;
	luring) argv=("$loadloop" "$dev" uring "$store" "$2" "$4" "$3" "$2" 600 1 "$5") ;;
	lpipe) argv=("$loadloop" "$dev" uring "$store" "$2" "$4" "$3" "$2" 600 1 "$5" pipe:2) ;;
	ltp) argv=("$loadloop" "$dev" threadpool "$store" "$2" "$4" "$3" "$2" 600 "$3" "$5") ;;
	f1) argv=("${fio[@]}") ;;
	f2) argv=("${fio[@]}" --iodepth_batch_submit="$half" --iodepth_batch_complete_min="$half") ;;
	f3) argv=("${fio[@]}" --iodepth_batch_submit="$half" --iodepth_batch_complete_min="$half"
		  --sqthread_poll=1) ;;
	f4) argv=("${fio[@]}" --iodepth_batch_submit="$3" --iodepth_batch_complete_min="$3"
		  --iomem_align=2m) ;;
	f5) argv=("${fio[@]}" --iodepth_batch_submit="$3" --iodepth_batch_complete_min="$3"
		  --bs="$unsplit" --iomem_align=2m) ;;
	b1) argv=("$bare" "$dev" "$store" "$2" "$3" 1 600 "$5") ;;
	b2) argv=("$bare" "$dev" "$store" "$2" "$4" 1 600 "$5") ;;
	b0) argv=("$bare" "$dev" "$store" "$2" "$3" 0 600 "$5") ;;
	b1c) argv=("$bare" "$dev" "$store" "$2" "$3" 1 600 "$5" coop) ;;
	esac
}

echo "guest: $(uname -r), $(nproc) CPUs online, legs of $secs s, $repeat rounds"
t_start=$SECONDS
: >"$out/cpu-raw.txt"
pruned=
for mb in $mbs; do
	nullb "$mb"
	msizes=$sizes
	[ "$mb" = 1 ] && msizes=$mb1_sizes
	for sz in $msizes; do
		IFS=: read -r cmd qd batch <<<"$sz"
		kvblk_ko "$cmd" "$qd"
		for r in $(seq "$repeat"); do
			for c in $cpus; do
				set_cpus "$c"
				legs=$legs_all
				[ "$mb" = 0 ] && legs+=" lpipe"
				unsplit=$(unsplit_bytes)
				((unsplit > cmd)) && unsplit=$cmd
				(($(cat /sys/block/nullb0/queue/max_segments) * 4096 < cmd)) && legs+=" f5 b0"
				# SQPOLL's thread polls on a CPU of its own: with one CPU it starves
				# the submitter (2026-12-06, 6.1: 3,959 IOPS per CPU s at 4 KiB against
				# f4's 148,187), so f3 runs at two CPUs only.
				[ "$c" = 1 ] && legs=${legs/ f3/}
				[ -n "$legs_only" ] && legs=$legs_only
				read -ra l <<<"$legs"
				n=${#l[@]}
				for ((i = 0; i < n; i++)); do
					lg=${l[$(((i + r) % n))]}
					if [[ " $pruned " = *" $mb-$cmd-$c-$lg "* ]]; then
						echo "$r $mb $cmd $qd $c $lg pruned" | tee -a "$out/cpu-raw.txt"
						continue
					fi
					argv_of "$lg" "$cmd" "$qd" "$batch" "$mb"
					# KVBLK_BENCH_PIN: the CPUs (taskset list) every leg runs on.
					[ -n "${KVBLK_BENCH_PIN:-}" ] && argv=(taskset -c "$KVBLK_BENCH_PIN" "${argv[@]}")
					v=$(leg "$lg" "$out/leg-$mb-$cmd-$c-$lg-$r.log" "${argv[@]}")
					echo "$r $mb $cmd $qd $c $lg ${v:-fail}" | tee -a "$out/cpu-raw.txt"
				done
				# After round 1: baseline points (fio's, bare io_uring's) below
				# KVBLK_BENCH_PRUNE (0.9) of that round's best (I/Os of CMD bytes, as
				# bytes / CMD, per CPU second; until 2026-12-06 the disk's requests,
				# which counted a point whose reads split twice and pruned b0, the one
				# that does not split) leave the search.
				[ "$r" = 1 ] && pruned+=" $(awk -v k="$mb $cmd $qd $c" -v p="$mb-$cmd-$c" \
					-v f="${KVBLK_BENCH_PRUNE:-0.9}" '
					$2 " " $3 " " $4 " " $5 == k && $6 ~ /^[fb]/ && $9 > 0 {
						v[$6] = $8 / $9; if (v[$6] > b) b = v[$6] }
					END { for (x in v) if (v[x] < f * b) printf "%s-%s ", p, x }' "$out/cpu-raw.txt")"
			done
		done
	done
done
set_cpus 2
echo "rounds: $((SECONDS - t_start)) s"

python3 $here/cpu-table.py "$out/cpu-raw.txt" "$secs" "$repeat" "$(uname -r)" \
	"$out/cpu-misses.txt" "$out/cpu-above.txt" | tee "$out/cpu-table.txt"

# Where the CPU goes where a goal was missed: the kvblk leg and the best fio point of the
# same configuration, one window each under perf record -a -g.
# KVBLK_BENCH_PERF_SECS (2) seconds each, sampled every 250 us of CPU time; the disk's I/Os
# in that window turn both into CPU microseconds per I/O (tests/vm/bench/perf-per-io.py).
# perf.data goes to a tmpfs: on the 9p run folder perf record's files ended with a "data size
# field" of 0 in the 7.2 guest, which had been taken for perf 6.1 (the host's) not recording
# in a guest of another kernel. On a tmpfs it records and reports there, kernel and userspace
# symbols alike (2026-12-06).
# Likewise the first kvblk.ko line above every userspace point (cpu-above.txt,
# KVBLK_BENCH_PERF_ABOVE: 1): what the baseline pays per I/O that kvblk.ko does not.
if [ "${KVBLK_BENCH_PERF:-1}" = 1 ] && { [ -s "$out/cpu-misses.txt" ] || [ -s "$out/cpu-above.txt" ]; } &&
	command -v perf >/dev/null; then
	pdir=$(mktemp -d /dev/shm/kvblk-perf.XXXXXX) || fail "no tmpfs folder for perf.data"
	echo "profiles: $(perf --version)"
	psecs=${KVBLK_BENCH_PERF_SECS:-2}
	period_ns=250000
	# Goals whose kvblk leg ran (KVBLK_BENCH_LEGS leaves the others without a figure).
	only() { awk -v only=" $legs_only " 'only == "  " || index(only, " " $5 " ")' "$1"; }
	# samples_sum FILE sym|dso: the percentages of perf report -n --sort comm,dso,sym
	# summed per symbol ("[k] name", as --sort sym prints) or per process and object
	# (as --sort comm,dso), largest first.
	samples_sum() {
		awk -v by="$2" '$1 ~ /^[0-9.]+%$/ && NF >= 6 {
			if (by == "dso") { k = sprintf("%-16s %s", $3, $4) }
			else { k = $5; for (i = 6; i <= NF; i++) k = k " " $i }
			v[k] += $1 }
		END { for (k in v) printf "%9.2f%%  %s\n", v[k], k }' "$1" | sort -rn
	}
	{
		only "$out/cpu-misses.txt" | head -n "${KVBLK_BENCH_PERF_MAX:-1}"
		only "$out/cpu-above.txt" | head -n "${KVBLK_BENCH_PERF_ABOVE:-1}"
	} |
	while read -r mb cmd qd c klg flg; do
		IFS=: read -r _ _ batch <<<"$(tr ' ' '\n' <<<"$sizes" | grep "^$cmd:")"
		nullb "$mb" >/dev/null
		kvblk_ko "$cmd" "$qd"
		set_cpus "$c"
		unsplit=$(unsplit_bytes)
		((unsplit > cmd)) && unsplit=$cmd
		for lg in $klg $flg; do
			p=$out/perf-mb$mb-$cmd-cpu$c-$lg pd=$pdir/perf-mb$mb-$cmd-cpu$c-$lg.data
			argv_of "$lg" "$cmd" "$qd" "$batch" "$mb"
			"${argv[@]}" >"$p-run.txt" 2>&1 &
			pid=$!
			sleep 1
			# The disk's I/Os in the sampled window itself: counted by perf's own workload
			# around its sleep. Counted around perf record (until 2026-12-06), they took in
			# perf's start and its writing of the data, seconds under TCG that differ per
			# leg: 1.3 million 4 KiB I/Os counted against 2 s of samples of a leg doing
			# 180k per second, and per-I/O ratios that contradicted the bench's.
			perf record -q -N -a -g -e cpu-clock -c "$period_ns" -o "$pd" -- sh -c \
				'read -r _ _ a _ <"$4"; sleep "$1"; read -r _ _ b _ <"$4"; echo $(((b - a) * 512 / $2)) >"$3"' \
				sh "$psecs" "$cmd" "$p-ios.txt" /sys/block/nullb0/stat >/dev/null 2>"$p-record.err"
			[ -s "$p-record.err" ] || rm -f "$p-record.err"
			kill -TERM $pid
			wait $pid 2>/dev/null
			if [ ! -s "$pd" ]; then
				echo "no profile: perf record wrote no data ($(perf --version 2>&1 | head -n 1), guest $(uname -r)): $(head -c 600 "$p-record.err" 2>/dev/null | tr '\n' ' ')" |
					tee "$p-top.txt"
				continue
			fi
			# One report per sort: the symbols (top) and the processes' objects (dso)
			# are sums over the samples' lines, not reports of their own (each perf
			# report of a 2 s profile takes seconds under TCG).
			perf report -i "$pd" -n --no-children --sort comm,dso,sym -g none --stdio \
				2>"$p-report.err" >"$p-samples.txt"
			samples_sum "$p-samples.txt" sym | head -n 40 >"$p-top.txt"
			samples_sum "$p-samples.txt" dso | head -n 20 >"$p-dso.txt"
			# Who calls the symbols above 2%: the samples of a cpu-clock profile land
			# where interrupts come back on (_raw_spin_unlock_irq*), so the chains say
			# whose section it was (null_blk's copy under its lock, ...).
			perf report -i "$pd" --no-children --sort sym -g caller,0.5,callee \
				--percent-limit 2 --stdio 2>/dev/null | grep -v '^#' | grep -v '^$' |
				head -n 400 >"$p-callers.txt"
			rm -f "$pd"
			# Say why rather than leave empty files.
			[ -s "$p-top.txt" ] ||
				echo "no profile: perf report printed nothing ($(perf --version 2>&1 | head -n 1), guest $(uname -r)): $(head -c 600 "$p-report.err" | tr '\n' ' ')" >"$p-top.txt"
			[ -s "$p-report.err" ] || rm -f "$p-report.err"
			echo "== profile mb=$mb $cmd B cpus=$c $lg: top symbols"
			head -n 15 "$p-top.txt"
		done
		# The pair per I/O: which code makes the kvblk leg's ratio (before the next
		# pair of this configuration profiles a leg again).
		p=$out/perf-mb$mb-$cmd-cpu$c
		if [ -s "$p-$klg-samples.txt" ] && [ -s "$p-$flg-samples.txt" ]; then
			echo "== profile mb=$mb $cmd B cpus=$c: $klg against $flg, CPU us per I/O"
			python3 $here/perf-per-io.py "$klg" "$p-$klg-samples.txt" "$(cat "$p-$klg-ios.txt")" \
				"$flg" "$p-$flg-samples.txt" "$(cat "$p-$flg-ios.txt")" $((period_ns / 1000)) |
				tee "$p-$klg-vs-$flg.txt"
		fi
		set_cpus 2
	done
	rm -rf "$pdir"
fi
echo "total: $((SECONDS - t_start)) s"
