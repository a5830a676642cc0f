#!/bin/bash
# SPDX-License-Identifier: MIT
# In the guest (tests/vm/bench/engines-bench.list, variant stripe4): kvblk.ko's
# block-layer engine vs its PRP engine vs fio io_uring (and libkvblk's uring
# backend with KVBLK_BENCH_URING=1 when kvblk-bench is built: it writes its
# store onto the target each round first, minutes under TCG), on one emulated NVMe namespace and on md
# RAID-0 over the variant's four slice namespaces (64 KiB chunks; no PRP leg:
# md is not an NVMe namespace).
#
#   All legs: one thread, KVBLK_BENCH_QD commands in flight (kvblk.ko's
#   max_inflight, fio's iodepth), KVBLK_BENCH_CMD-byte commands (max_cmd_bytes,
#   fio's bs), reading the target from its start for KVBLK_BENCH_SECS seconds
#   (kvblk: 1 MiB objects, 16 per LOAD_MANY call, tests/kmod-smoke/kmod_bench,
#   its first batch checked against pread). KVBLK_BENCH_REPEAT interleaved
#   rounds, medians. KVBLK_BENCH_HUGE=1 (the default) adds the kvblk legs again
#   into a buffer of 2 MiB transparent huge pages (kmod_bench -H: physically
#   contiguous runs, fewer DMA segments per command). CPU s/GB: the leg's process, user + system (getrusage for
#   kmod_bench, fio's usr_cpu + sys_cpu). Then (KVBLK_BENCH_PERF=1, the default,
#   where the guest has perf) one system-wide perf profile per kvblk.ko engine.
# Output: engines-table.txt and the raw lines in $KVBLK_VM_CASE_DIR.
. "$(dirname "$0")/../cases/lib.sh"
set +e

qd=${KVBLK_BENCH_QD:-32}
cmd=${KVBLK_BENCH_CMD:-131072}
secs=${KVBLK_BENCH_SECS:-3}
repeat=${KVBLK_BENCH_REPEAT:-3}
out=${KVBLK_VM_CASE_DIR:?}
kb=tests/kmod-smoke/kmod_bench
bench=${KVBLK_BENCH_BIN:-build/tools/kvblk-bench/kvblk-bench}
[ -x "$kb" ] || skip "$kb not built"
[ -f "${KVBLK_KO:-}" ] || skip "kvblk.ko not built"
insmod "$KVBLK_KO" max_cmd_bytes="$cmd" max_inflight="$qd" || fail "insmod $KVBLK_KO"
md=
trap 'rmmod kvblk 2>/dev/null; [ -n "$md" ] && mdadm --stop "$md" >/dev/null 2>&1' EXIT

nvme=$KVBLK_TEST_DEVICE
targets=("nvme:$nvme")
m=()
for k in 1 2 3 4; do wait_extra_ns $k; m+=("$(extra_ns $k)"); done
if modprobe raid0 2>/dev/null && mdadm --build /dev/md/kvblkb --level=0 --chunk=64 \
	--raid-devices=4 "${m[@]}" >/dev/null 2>&1; then
	md=$(readlink -f /dev/md/kvblkb)
	targets+=("md:$md")
else
	echo "no md RAID-0 (mdadm --build failed): namespace only"
fi

fio_leg() { # dev size -> "GB/s cpu_s_per_GB"
	fio --name=b --filename="$1" --readonly --rw=read --ioengine=io_uring --direct=1 \
		--bs="$cmd" --iodepth="$qd" --numjobs=1 --size="$2" --time_based \
		--runtime="$secs" --output-format=json 2>/dev/null |
		python3 -c 'import json,sys
j = json.load(sys.stdin)["jobs"][0]; r = j["read"]
gb = r["io_bytes"] / 1e9; s = r["runtime"] / 1e3
print("%.3f %.3f" % (gb / s, (j["usr_cpu"] + j["sys_cpu"]) / 100 * s / gb))'
}
# kmod_bench's arguments for a kvblk.ko leg (bio, prp; bioH, prpH: into 2 MiB huge
# pages) on device $2 of $3 bytes: 1 MiB objects, 16 per call, $secs seconds.
kb_argv() { # leg dev size -> kb_args
	kb_args=(-e "${1%H}")
	[ "${1%H}" != "$1" ] && kb_args+=(-H)
	kb_args+=("$2" "$3" 1048576 16 "$secs")
}
uring_leg() { # dev size -> "GB/s cpu_s_per_GB" from kvblk-bench --backends uring
	[ -x "$bench" ] || return 1
	"$bench" --device "$1" --i-know-this-overwrites -n 16 -s $(($2 / 16 >> 20)) --backends uring \
		--qd "$qd" --cmd-size "$cmd" --batch-objects 16 --buffer-mib 64 --no-fio --repeat 1 -q -o json \
		2>/dev/null | python3 -c 'import json,sys
r = [x for x in json.load(sys.stdin).get("results", []) if x.get("backend") == "uring"][0]
print("%.3f %s" % (r["gbps"], ("%.3f" % r["cpu_s_per_gb"]) if r.get("cpu_s_per_gb") is not None else "-"))'
}

# KVBLK_BENCH_NOMERGES=N: write N to the namespace's queue/nomerges first (2: the
# block layer neither merges nor flushes its plug early behind a request of 128 KiB
# or more, so one doorbell serves many commands; block/blk-mq.c, blk_add_rq_to_plug()).
if [ -n "${KVBLK_BENCH_NOMERGES:-}" ]; then
	echo "$KVBLK_BENCH_NOMERGES" >"/sys/block/$(basename "$nvme")/queue/nomerges" ||
		fail "nomerges=$KVBLK_BENCH_NOMERGES on $nvme"
	echo "$nvme: queue/nomerges = $(cat "/sys/block/$(basename "$nvme")/queue/nomerges")"
fi

for r in $(seq "$repeat"); do
	for t in "${targets[@]}"; do
		name=${t%%:*} dev=${t#*:}
		size=$(blockdev --getsize64 "$dev")
		legs="bio fio"
		[ "$name" = nvme ] && legs="bio prp fio"
		# The same kvblk legs into a buffer of 2 MiB huge pages (kmod_bench -H).
		if [ "${KVBLK_BENCH_HUGE:-1}" = 1 ]; then
			legs="$legs bioH"
			[ "$name" = nvme ] && legs="$legs prpH"
		fi
		[ "${KVBLK_BENCH_URING:-0}" = 1 ] && [ -x "$bench" ] && legs="$legs uring"
		# The legs' order turns each round.
		read -ra l <<<"$legs"
		n=${#l[@]}
		for ((i = 0; i < n; i++)); do
			leg=${l[$(((i + r) % n))]}
			case $leg in
			bio|prp|bioH|prpH)
				kb_argv "$leg" "$dev" "$size"
				v=$("$kb" "${kb_args[@]}" | cut -d' ' -f2,3) ;;
			fio) v=$(fio_leg "$dev" "$size") ;;
			uring) v=$(uring_leg "$dev" "$size") ;;
			esac
			echo "$r $name $leg ${v:-fail}" | tee -a "$out/engines-raw.txt"
		done
	done
done

if [ "${KVBLK_BENCH_PERF:-1}" = 1 ] && command -v perf >/dev/null; then
	# Where each engine's CPU goes: one system-wide profile of a whole kmod_bench
	# run per engine on the namespace (and the block-layer engine on md), both vCPUs,
	# idle included. perf-<target>-<engine>-top.txt: symbols; -dso.txt: kernel,
	# kvblk.ko and the rest; -callers.txt: the call chains into the symbols above 2%.
	# perf.data goes to a tmpfs, as in guest-cpu-bench.sh: on the 9p run folder perf
	# record's files end with a "data size field" of 0 in the 7.2 guest.
	pdir=$(mktemp -d /dev/shm/kvblk-perf.XXXXXX) || fail "no tmpfs folder for perf.data"
	for t in "${targets[@]}"; do
		name=${t%%:*} dev=${t#*:}
		size=$(blockdev --getsize64 "$dev")
		legs=bio
		[ "$name" = nvme ] && legs="bio prp"
		[ "$name" = nvme ] && [ "${KVBLK_BENCH_HUGE:-1}" = 1 ] && legs="$legs bioH"
		for leg in $legs; do
			p=$out/perf-$name-$leg pd=$pdir/perf-$name-$leg.data
			kb_argv "$leg" "$dev" "$size"
			perf record -q -a -g -o "$pd" -- "$kb" "${kb_args[@]}" >"$p-run.txt" 2>&1
			rc=$?
			if [ ! -s "$pd" ]; then
				# e.g. the host's perf on another kernel's guest: say so, once per leg.
				echo "no profile: perf record exited $rc without data (perf $(perf --version 2>&1 | head -n 1))" |
					tee "$p-top.txt"
				continue
			fi
			perf report -i "$pd" --no-children --sort sym -g none --stdio 2>/dev/null |
				grep -v '^#' | grep -v '^$' | head -n 50 >"$p-top.txt"
			perf report -i "$pd" --no-children --sort dso -g none --stdio 2>/dev/null |
				grep -v '^#' | grep -v '^$' | head -n 20 >"$p-dso.txt"
			# Who calls the symbols above 2% (idle and the check's memcmp included).
			perf report -i "$pd" --no-children --sort sym -g caller,0.5,callee \
				--percent-limit 2 --stdio 2>/dev/null | grep -v '^#' | grep -v '^$' |
				head -n 400 >"$p-callers.txt"
			rm -f "$pd"
		done
	done
	rm -rf "$pdir"
fi

python3 - "$out/engines-raw.txt" "$qd" "$cmd" "$secs" "$repeat" <<'PY' | tee "$out/engines-table.txt"
import statistics, sys
raw, qd, cmd, secs, rep = sys.argv[1:]
rows = {}
for line in open(raw):
    r, tgt, leg, *v = line.split()
    if v and v[0] != 'fail':
        rows.setdefault((tgt, leg), []).append([float(x) if x != '-' else None for x in v])
names = {'bio': 'kvblk.ko block-layer engine', 'prp': 'kvblk.ko PRP engine',
         'bioH': 'block-layer engine, huge pages', 'prpH': 'PRP engine, huge pages',
         'fio': 'fio io_uring (O_DIRECT)', 'uring': 'libkvblk uring'}
print('target  leg                            thr  QD   GB/s  CPU s/GB  runs')
for tgt in ('nvme', 'md'):
    med = {}
    for leg in ('bio', 'prp', 'bioH', 'prpH', 'uring', 'fio'):
        v = rows.get((tgt, leg))
        if not v:
            continue
        gb = statistics.median(x[0] for x in v)
        cpu = [x[1] for x in v if x[1] is not None]
        cpu = statistics.median(cpu) if cpu else None
        med[leg] = (gb, cpu)
        print('%-7s %-30s %3d %3s %6.3f  %8s  %s' % (tgt, names[leg], 1, qd, gb,
              '%.3f' % cpu if cpu is not None else '-', ' '.join('%.3f' % x[0] for x in v)))
    if 'bio' in med and 'prp' in med:
        print('        bio / prp: %.2fx GB/s, %.2fx CPU per GB' % (med['bio'][0] / med['prp'][0],
              med['bio'][1] / med['prp'][1]))
    if 'bioH' in med and 'prpH' in med:
        print('        huge pages: bio / prp: %.2fx GB/s, %.2fx CPU per GB' % (
              med['bioH'][0] / med['prpH'][0], med['bioH'][1] / med['prpH'][1]))
    if 'bio' in med and 'fio' in med:
        print('        bio / fio io_uring: %.2fx GB/s' % (med['bio'][0] / med['fio'][0]))
print('(%s-byte commands, QD %s, one thread per leg, %s s per leg, medians of %s rounds;'
      ' kvblk legs: 1 MiB objects, 16 per call)' % (cmd, qd, secs, rep))
PY
