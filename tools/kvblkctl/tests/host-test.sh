#!/bin/bash
# SPDX-License-Identifier: MIT
#
# kvblkctl on the host, against a fake sysfs/dev tree under a temp dir
# (KVBLK_SYSFS_ROOT, KVBLK_DEV_ROOT): every printed value equals the file it
# came from, JSON parses and carries its schema keys, bad tunable values are
# refused with the range and the file untouched, crossover numbers equal
# hand-computed ones; probe on a regular file (uring backend) writes and
# removes its scratch file, leaves an existing file untouched, and its loads
# add up; trace converts captured tracefs lines and refuses without tracefs
# or kvblk's events, leaving no instance behind.
# usage: host-test.sh PATH/TO/kvblkctl
set -uo pipefail

K=${1:?usage: host-test.sh KVBLKCTL}
SRC=$(cd "$(dirname "$0")/../../.." && pwd)
T=$(mktemp -d /tmp/kvblkctl-test.XXXXXX)
trap 'rm -rf "$T"' EXIT
fails=0
pass=0

ok() { pass=$((pass + 1)); echo "ok: $*"; }
bad() { fails=$((fails + 1)); echo "FAIL: $*" >&2; }
# check WHAT GOT WANT
check() { if [ "$2" = "$3" ]; then ok "$1 = $2"; else bad "$1: got '$2', want '$3'"; fi; }
# jq_check WHAT JSON FILTER WANT
jq_check() { check "$1" "$(jq -r "$3" <<<"$2" 2>&1)" "$4"; }

# --- the fake tree ---------------------------------------------------------
S=$T/sys
D=$T/dev
mkdir -p "$S/module/kvblk/parameters" "$D"
echo 0.1.0 >"$S/module/kvblk/version"
echo 1048576 >"$S/module/kvblk/parameters/max_cmd_bytes"
echo 256 >"$S/module/kvblk/parameters/max_inflight"
echo 4096 >"$S/module/kvblk/parameters/max_descs"
N=$S/kernel/kvblk/nvme0n1
mkdir -p "$N/stats" "$S/kernel/kvblk/nvme1n1/stats"
declare -A info=([nsid]=1 [lba_size]=4096 [hw_max_cmd_bytes]=131072 [nr_hw_queues]=2
	[pci_dev]=0000:00:03.0 [dev]=259:0 [engine]=prp [attached]=2
	[max_cmd_bytes]=131072 [max_inflight]=128 [max_descs]=4096)
for f in "${!info[@]}"; do echo "${info[$f]}" >"$N/$f"; done
declare -A ctr=([batches]=12 [batches_interrupted]=1 [objects]=345 [objects_failed]=2
	[commands]=6789 [bytes]=123456789012 [bytes_written]=8192 [errors_io]=3 [errors_media]=4
	[errors_transport]=5 [errors_other]=6 [inflight]=7 [inflight_peak]=64)
for f in "${!ctr[@]}"; do echo "${ctr[$f]}" >"$N/stats/$f"; done
hist() { # FILE SEED: 32 lines "<lower bound> <count>" like kvblk.ko's
	local b lo
	for ((b = 0; b < 32; b++)); do
		lo=$((b ? 1 << (b - 1) : 0))
		if ((b >= 4 && b <= 9)); then echo "$lo $(((b * $2) % 97 + 1))"; else echo "$lo 0"; fi
	done >"$1"
}
hist "$N/stats/cmd_latency_us" 7
hist "$N/stats/batch_latency_us" 13
# nvme1n1: a second namespace, all zero
for f in "${!info[@]}"; do echo "${info[$f]}" >"$S/kernel/kvblk/nvme1n1/$f"; done
for f in "${!ctr[@]}"; do echo 0 >"$S/kernel/kvblk/nvme1n1/stats/$f"; done
hist "$S/kernel/kvblk/nvme1n1/stats/cmd_latency_us" 0
hist "$S/kernel/kvblk/nvme1n1/stats/batch_latency_us" 0
: >"$D/kvblk"
: >"$D/ng0n1"
export KVBLK_SYSFS_ROOT=$S KVBLK_DEV_ROOT=$D

# --- list --------------------------------------------------------------------
out=$("$K" list)
grep -q '^module      loaded, version 0.1.0$' <<<"$out" && ok "list: module version" || bad "list: $out"
grep -q 'nvme0n1 .*nsid 1, lba 4096, 2 context(s) attached, pci 0000:00:03.0' <<<"$out" &&
	ok "list: nvme0n1 line" || bad "list: $out"
grep -q '^backends    kmod .*uring_cmd psync threadpool$' <<<"$out" && ok "list: backends" || bad "list: $out"
j=$("$K" -o json list)
jq_check "list json schema_version" "$j" .schema_version 1
jq_check "list json module" "$j" '"\(.module.loaded) \(.module.version)"' "true 0.1.0"
jq_check "list json namespaces" "$j" '[.namespaces[].name] | join(",")' "nvme0n1,nvme1n1"
jq_check "list json nvme0n1" "$j" '.namespaces[0] | "\(.attached) \(.nsid) \(.lba_size) \(.pci_dev)"' \
	"2 1 4096 0000:00:03.0"
jq_check "list json backends" "$j" '[.backends[] | select(.name != "uring") | "\(.name)=\(.available)"] | join(" ")' \
	"kmod=true uring_cmd=true psync=true threadpool=true"
jq_check "list json -o after subcommand" "$("$K" list -o json)" .schema_version 1
E=$T/empty
mkdir -p "$E/sys" "$E/dev"
j=$(KVBLK_SYSFS_ROOT=$E/sys KVBLK_DEV_ROOT=$E/dev "$K" -o json list)
jq_check "list json, no module" "$j" \
	'"\(.module.loaded) \(.namespaces | length) \([.backends[] | select(.name == "kmod" or .name == "uring_cmd") | .available])"' \
	'false 0 [false,false]'
out=$(KVBLK_SYSFS_ROOT=$E/sys "$K" list | head -1)
check "list, no module" "$out" "module      not loaded"
rm "$S/module/kvblk/version"
jq_check "list json, no version file" "$("$K" -o json list)" .module.version unknown
echo 0.1.0 >"$S/module/kvblk/version"

# --- stats -------------------------------------------------------------------
j=$("$K" -o json stats nvme0n1)
jq_check "stats json schema_version" "$j" .schema_version 1
jq_check "stats json device" "$j" '.devices | map(.device) | join(",")' nvme0n1
for f in "${!ctr[@]}"; do
	jq_check "stats json $f" "$j" ".devices[0].counters.$f" "${ctr[$f]}"
done
jq_check "stats json counters are integers" "$j" '[.devices[0].counters[] | type] | unique | join(",")' number
jq_check "stats json counters are whole" "$j" '[.devices[0].counters[] | select(. != floor)] | length' 0
for h in cmd_latency_us batch_latency_us; do
	want=$(awk '{printf "%s%s:%s", (NR > 1 ? " " : ""), $1, $2}' "$N/stats/$h")
	jq_check "stats json $h" "$j" "[.devices[0].${h}[] | \"\\(.lower_us):\\(.count)\"] | join(\" \")" "$want"
done
jq_check "stats json, all namespaces" "$("$K" -o json stats)" '.devices | map(.device) | join(",")' nvme0n1,nvme1n1
jq_check "stats json /dev path and partition" "$("$K" -o json stats /dev/nvme0n1p2)" '.devices[0].device' nvme0n1
out=$("$K" stats nvme0n1)
grep -q '^  commands             6789$' <<<"$out" && ok "stats: commands line" || bad "stats: $out"
grep -q '^  bytes                123456789012 (115.0 GiB)$' <<<"$out" && ok "stats: bytes line" || bad "stats: $out"
grep -q '^  bytes_written        8192 (8.0 KiB)$' <<<"$out" && ok "stats: bytes_written line" || bad "stats: $out"
# cmd_latency_us: buckets 4..9 hold 29 36 43 50 57 64 (279); bucket 4 (8us) holds 4*7%97+1 = 29, the peak bucket 9 (256us) 9*7%97+1 = 64: full bar
grep -qE '^ +8us \.\. 16us +29 \|#{19}$' <<<"$out" && ok "stats: histogram bar 8us" || bad "stats: $out"
grep -qE '^ +256us \.\. 512us +64 \|#{40}$' <<<"$out" && ok "stats: histogram peak bar" || bad "stats: $out"
grep -q 'cmd_latency_us (279 samples)' <<<"$out" && ok "stats: histogram total" || bad "stats: $out"
# --watch: counters move by known amounts between the two samples
("$K" -o json stats nvme0n1 --watch 2 >"$T/watch.json") &
wpid=$!
sleep 0.7
echo $((345 + 1000)) >"$N/stats/objects"
echo $((6789 + 3000)) >"$N/stats/commands"
echo $((123456789012 + 4000000000)) >"$N/stats/bytes"
wait $wpid
j=$(cat "$T/watch.json")
jq_check "stats --watch objects after" "$j" .devices[0].counters.objects 1345
jq_check "stats --watch objects delta" "$j" '.devices[0].rates | (.objects_per_s * .interval_s) | round' 1000
jq_check "stats --watch commands delta" "$j" '.devices[0].rates | (.commands_per_s * .interval_s) | round' 3000
jq_check "stats --watch bytes delta" "$j" '.devices[0].rates | (.bytes_per_s * .interval_s) | round' 4000000000
jq_check "stats --watch gb_per_s" "$j" '.devices[0].rates | (.gb_per_s * 1e9 - .bytes_per_s) | fabs < 1e-3' true
jq_check "stats --watch interval" "$j" '.devices[0].rates.interval_s | (. >= 2 and . < 4)' true
for f in objects commands bytes; do echo "${ctr[$f]}" >"$N/stats/$f"; done
err=$("$K" stats nvme0n1 --reset 2>&1); rc=$?
check "stats --reset message" "$err" "kvblkctl: stats: reset: not supported by this kvblk.ko"
check "stats --reset exit" "$rc" 1
err=$("$K" stats nvme9n1 2>&1); rc=$?
check "stats unknown device" "$err (rc $rc)" \
	"kvblkctl: stats: nvme9n1: not attached to kvblk (no $S/kernel/kvblk/nvme9n1) (rc 1)"
err=$(KVBLK_SYSFS_ROOT=$E/sys "$K" stats 2>&1); rc=$?
check "stats, no module" "$err (rc $rc)" "kvblkctl: stats: kvblk.ko is not loaded (rc 1)"

# --- tune --------------------------------------------------------------------
j=$("$K" -o json tune get)
jq_check "tune get json schema_version" "$j" .schema_version 1
jq_check "tune get json rows" "$j" '[.tunables[] | "\(.scope)/\(.name)=\(.value)"] | join(" ")' \
	"module/max_cmd_bytes=1048576 module/max_inflight=256 module/max_descs=4096 nvme0n1/max_cmd_bytes=131072 nvme0n1/max_inflight=128 nvme0n1/max_descs=4096 nvme1n1/max_cmd_bytes=131072 nvme1n1/max_inflight=128 nvme1n1/max_descs=4096"
# The table's ranges and defaults equal kmod/kvblk.h's.
kh() { sed -n "s/^#define KVBLK_$1[[:space:]]*//p" "$SRC/kmod/kvblk.h"; }
if [ -f "$SRC/kmod/kvblk.h" ]; then
	jq_check "ranges = kmod/kvblk.h" "$j" \
		'[.tunables[] | select(.scope == "module") | "\(.name) \(.min) \(.max) \(.align) \(.default)"] | join(", ")' \
		"max_cmd_bytes 4096 $((8 << 20)) 4096 $((1 << 20)), max_inflight $(kh MAX_INFLIGHT_MIN | tr -d U) $(kh MAX_INFLIGHT_MAX | tr -d U) 1 $(kh MAX_INFLIGHT_DEF | tr -d U), max_descs $(kh MAX_DESCS_MIN | tr -d U) $(kh MAX_DESCS_MAX | tr -d U) 1 $(kh MAX_DESCS_DEF | tr -d U)"
	check "kmod/kvblk.h max_cmd_bytes" "$(kh MAX_CMD_BYTES_MIN) $(kh MAX_CMD_BYTES_MAX) $(kh MAX_CMD_BYTES_DEF)" \
		"KVBLK_CTRL_PAGE_SIZE (8U << 20) SZ_1M"
fi
jq_check "tune get NAME" "$("$K" -o json tune get max_inflight)" '[.tunables[] | "\(.scope)=\(.value)"] | join(" ")' \
	"module=256 nvme0n1=128 nvme1n1=128"
jq_check "tune get DEVICE NAME" "$("$K" -o json tune get /dev/nvme0n1 max_inflight)" \
	'[.tunables[] | "\(.scope)=\(.value) \(.min)..\(.max) \(.default)"] | join(" ")' "nvme0n1=128 1..65536 256"
out=$("$K" tune get nvme0n1 max_cmd_bytes | tail -1)
check "tune get normal" "$(tr -s ' ' <<<"$out")" "nvme0n1 max_cmd_bytes 131072 1048576 4096..8388608, multiple of 4096 bytes"
tune_refused() { # WANT_MESSAGE ARGS...: refused, file untouched
	local want=$1 before after err rc
	shift
	before=$(cat "$N/max_inflight" "$N/max_cmd_bytes" | tr '\n' ' ')
	err=$("$K" tune set "$@" 2>&1); rc=$?
	after=$(cat "$N/max_inflight" "$N/max_cmd_bytes" | tr '\n' ' ')
	check "tune set $* refused" "$err (rc $rc)" "$want (rc 1)"
	check "tune set $* left the files" "$after" "$before"
}
tune_refused "kvblkctl: tune set: max_inflight=0 out of range 1..65536" nvme0n1 max_inflight 0
tune_refused "kvblkctl: tune set: max_inflight=65537 out of range 1..65536" nvme0n1 max_inflight 65537
tune_refused "kvblkctl: tune set: max_inflight=-1 is not a number (range 1..65536)" nvme0n1 max_inflight -1
tune_refused "kvblkctl: tune set: max_inflight=12x is not a number (range 1..65536)" nvme0n1 max_inflight 12x
tune_refused "kvblkctl: tune set: max_cmd_bytes=5000 is not a multiple of 4096 (range 4096..8388608, multiple of 4096)" \
	nvme0n1 max_cmd_bytes 5000
tune_refused "kvblkctl: tune set: max_cmd_bytes=16777216 out of range 4096..8388608" nvme0n1 max_cmd_bytes 16777216
tune_refused "kvblkctl: tune set: unknown tunable 'queue_depth' (known: max_cmd_bytes, max_inflight, max_descs)" \
	nvme0n1 queue_depth 4
tune_refused "kvblkctl: tune set: nvme9n1: not attached to kvblk (no $S/kernel/kvblk/nvme9n1)" nvme9n1 max_inflight 4
out=$("$K" tune set nvme0n1 max_inflight 512)
check "tune set output" "$out" "nvme0n1 max_inflight: 128 -> 512"
check "tune set wrote" "$(cat "$N/max_inflight")" 512
j=$("$K" -o json tune set module max_descs 0x100)
jq_check "tune set json" "$j" '"\(.schema_version) \(.scope) \(.name) \(.old_value) \(.value)"' "1 module max_descs 4096 256"
check "tune set module (0x100) wrote decimal" "$(cat "$S/module/kvblk/parameters/max_descs")" 256
"$K" tune set --dry-run nvme0n1 max_inflight 64 >/dev/null
check "tune set --dry-run left the file" "$(cat "$N/max_inflight")" 512
# A write the "kernel" refuses: strerror of the write's errno.
mv "$N/max_descs" "$T/max_descs.saved"; mkdir "$N/max_descs"
err=$("$K" tune set nvme0n1 max_descs 100 2>&1); rc=$?
check "tune set refused by the kernel" "$err (rc $rc)" "kvblkctl: tune set: nvme0n1: max_descs=100: Is a directory (rc 1)"
rmdir "$N/max_descs"; mv "$T/max_descs.saved" "$N/max_descs"
j=$(KVBLK_SYSFS_ROOT=$E/sys "$K" -o json tune get)
jq_check "tune get, no module: ranges only" "$j" '[.tunables[] | "\(.scope) \(.value) \(.default)"] | join(",")' \
	"null null 1048576,null null 256,null null 4096"

# --- crossover ---------------------------------------------------------------
j=$("$K" -o json crossover --model llama-3.1-8b --load-gbps 5 --recompute-tokens-per-s 10000)
jq_check "crossover json schema_version" "$j" .schema_version 1
# 2 * 32 layers * 8 KV heads * 128 * 2 B * 256 tokens = 33554432 (32 MiB)
jq_check "crossover 8B bytes per chunk" "$j" .results[0].bytes_per_chunk 33554432
jq_check "crossover 8B bytes per rank" "$j" .results[0].bytes_per_rank 33554432
# 33554432 / 5e9 = 0.0067108864 s; 256 / 10000 = 0.0256 s; ratio 0.262144
jq_check "crossover 8B load_s" "$j" '.results[0].load_s * 1e10 | round' 67108864
jq_check "crossover 8B recompute_s" "$j" '.results[0].recompute_s * 1e4 | round' 256
jq_check "crossover 8B ratio" "$j" '.results[0].ratio * 1e6 | round' 262144
jq_check "crossover 8B verdict" "$j" .results[0].verdict load
# 70B, tp 8: 2*80*8*128*2*256 = 83886080; per rank 1 head: 10485760;
# at 0.2 GB/s 52.4 ms to load, 25.6 ms to recompute
j=$("$K" crossover -o json --model llama-3.1-70b --tp 8 --load-gbps 0.2 --recompute-tokens-per-s 10000)
jq_check "crossover 70B tp8" "$j" '.results[0] | "\(.bytes_per_chunk) \(.bytes_per_rank) \(.verdict)"' \
	"83886080 10485760 recompute"
# 70B, tp 16: still one (replicated) head per rank
jq_check "crossover 70B tp16" "$("$K" -o json crossover --model llama-3.1-70b --tp 16 --load-gbps 1)" \
	.results[0].bytes_per_rank 10485760
# Assumed recompute rate: 400e12 / (2 * 8.03e9) = 24906.6 tokens/s
j=$("$K" -o json crossover --model llama-3.1-8b --load-gbps 5)
jq_check "crossover assumed rate" "$j" '.results[0].recompute_tokens_per_s * 10 | round' 249066
jq_check "crossover assumed rate labelled" "$j" '.results[0].recompute_source | startswith("assumed: 400 TFLOP/s")' true
# Custom geometry, fp8, 1024 tokens: 2*40*4*64*1*1024 = 20971520
jq_check "crossover custom" "$("$K" -o json crossover --layers 40 --kv-heads 4 --head-dim 64 --dtype-bytes 1 --tokens 1024 --load-gbps 2 --params 3)" \
	'.results[0] | "\(.model) \(.bytes_per_chunk)"' "custom 20971520"
jq_check "crossover all presets" "$("$K" -o json crossover --load-gbps 5)" '[.results[] | "\(.model)=\(.bytes_per_chunk)"] | join(" ")' \
	"llama-3.1-8b=33554432 llama-3.1-70b=83886080 llama-3.1-405b=132120576"
out=$("$K" crossover --model llama-3.1-8b --load-gbps 5 --recompute-tokens-per-s 10000)
grep -q '^  bytes per chunk  33554432 (32.0 MiB)$' <<<"$out" && ok "crossover normal bytes" || bad "crossover: $out"
grep -q '^  verdict          load (3.81x faster than recompute)$' <<<"$out" && ok "crossover normal verdict" || bad "crossover: $out"
err=$("$K" crossover --model llama-3.1-8b 2>&1); rc=$?
check "crossover without bandwidth" "$err (rc $rc)" \
	"kvblkctl: crossover: no load bandwidth: give --load-gbps GB/s or --measure PATH (rc 1)"
err=$("$K" crossover --layers 4 --kv-heads 2 --head-dim 64 --load-gbps 1 2>&1); rc=$?
check "crossover custom without rate" "$err (rc $rc)" \
	"kvblkctl: crossover: a custom model needs --recompute-tokens-per-s or --params (billions, for the assumed recompute rate) (rc 1)"
err=$("$K" crossover --model gpt-5 --load-gbps 1 2>&1); rc=$?
check "crossover unknown model" "$err (rc $rc)" \
	"kvblkctl: crossover: unknown model 'gpt-5' (presets: llama-3.1-8b, llama-3.1-70b, llama-3.1-405b) (rc 1)"
head -c $((16 << 20)) /dev/zero >"$T/measure.bin"
j=$("$K" -o json crossover --model llama-3.1-8b --measure "$T/measure.bin" --measure-seconds 0.3)
jq_check "crossover --measure" "$j" '"\(.load_gbps > 0) \(.load_source | startswith("measured on"))"' "true true"
"$K" crossover --load-gbps 1 --measure "$T/measure.bin" >/dev/null 2>&1
check "crossover --load-gbps excludes --measure (exit)" "$?" 2

# --- info (no NVMe here: only the error paths) -----------------------------
: >"$D/nvme0n1"
err=$("$K" info nvme0n1 2>&1); rc=$?
check "info on a non-NVMe file" "$err (rc $rc)" \
	"kvblkctl: info: $D/nvme0n1: not an NVMe namespace (get nsid: Inappropriate ioctl for device) (rc 1)"
err=$("$K" info nvme7n1 2>&1); rc=$?
check "info on a missing device" "$err (rc $rc)" "kvblkctl: info: $D/nvme7n1: No such file or directory (rc 1)"
"$K" info >/dev/null 2>&1
check "info without DEVICE (exit)" "$?" 2

# --- probe (regular files; libkvblk's uring backend, fio if installed) ------
PR=$(mktemp -d "${KVBLKCTL_TEST_DIR:-/var/tmp}/kvblkctl-probe.XXXXXX") # O_DIRECT: not tmpfs
trap 'rm -rf "$T" "$PR"' EXIT
j=$("$K" -o json probe --write --seconds 2 "$PR/scratch.bin" 2>"$T/probe.err"); rc=$?
check "probe --write exit" "$rc" 0
[ -e "$PR/scratch.bin" ] && bad "probe: scratch file left behind" || ok "probe: scratch file removed"
jq_check "probe schema_version" "$j" .schema_version 1
jq_check "probe backend, kind, wrote" "$j" '"\(.backend) \(.kind) \(.wrote) \(.scratch_file_removed) \(.data_path)"' \
	"uring file true true host"
jq_check "probe span" "$j" .span_bytes 134217728
jq_check "probe backend reason" "$j" '.backend_reason | length > 0' true
jq_check "probe load points" "$j" '[.loads[] | "\(.object_bytes)x\(.objects_per_call)"] | join(" ")' \
	"262144x1 262144x8 2097152x1 2097152x8 16777216x1 16777216x8"
jq_check "probe: bytes = calls x objects x size" "$j" '[.loads[] | select(.bytes != .calls * .objects_per_call * .object_bytes)] | length' 0
jq_check "probe: commands = bytes / max_cmd_bytes" "$j" '. as $d | [.loads[] | select(.commands * $d.max_cmd_bytes != .bytes)] | length' 0
jq_check "probe: every point moved" "$j" '[.loads[] | select(.gbps > 0 and .seconds > 0)] | length' 6
jq_check "probe: sizes = best of their points" "$j" \
	'. as $d | [.sizes[] | . as $s | select(.best_gbps != ([$d.loads[] | select(.object_bytes == $s.object_bytes) | .gbps] | max))] | length' 0
if command -v fio >/dev/null; then
	jq_check "probe ceiling = best fio point" "$j" '.ceiling.gbps == ([.ceiling.points[] | select(.ok) | .gbps] | max)' true
	jq_check "probe ceiling command size" "$j" '.ceiling.block_bytes == .max_cmd_bytes' true
	jq_check "probe ceiling rounds" "$j" '.ceiling.rounds | length' 3
	jq_check "probe ceiling = median round" "$j" '.ceiling.gbps == (.ceiling.rounds | sort | .[1])' true
	jq_check "probe spread = (max - min) / median" "$j" \
		'.ceiling.rounds as $r | (.ceiling.spread - (($r | max) - ($r | min)) / .ceiling.gbps) | fabs < 1e-9' true
	jq_check "probe verdict only from a stable ceiling, from the 2M and 16M ratios" "$j" \
		'.verdict_ratio == ([.sizes[1].of_ceiling, .sizes[2].of_ceiling] | min) and
		 .ceiling.stable == (.ceiling.spread <= 0.2) and
		 .verdict == (if .ceiling.stable | not then "unstable" elif .verdict_ratio >= 0.8 then "fast"
			      elif .verdict_ratio >= 0.5 then "ok" else "slow" end) and
		 (.ceiling.stable or (.verdict_reason | test("ceiling was unstable: rounds .* spread")))' true
fi
grep -q "^kvblkctl: probe: writing 134217728 (128.0 MiB) of $PR/scratch.bin first$" "$T/probe.err" &&
	ok "probe: says it writes" || bad "probe stderr: $(cat "$T/probe.err")"
# Without fio: no ceiling, verdict unknown, still exit 0 (PATH has no fio).
j=$(PATH=/nonexistent "$K" -o json probe --write --seconds 1 "$PR/nofio.bin" 2>/dev/null); rc=$?
check "probe without fio exit" "$rc" 0
jq_check "probe without fio" "$j" '"\(.verdict) \(.ceiling.available) \(.verdict_ratio)"' "unknown false null"
jq_check "probe without fio reason" "$j" '.verdict_reason | startswith("no device ceiling: fio not found")' true
# An existing file is only read.
head -c $((128 << 20)) /dev/urandom >"$PR/data.bin"
sum0=$(md5sum <"$PR/data.bin")
out=$("$K" probe --seconds 1 "$PR/data.bin" 2>&1); rc=$?
check "probe read-only exit" "$rc" 0
check "probe read-only: file untouched" "$(md5sum <"$PR/data.bin")" "$sum0"
grep -q "^probe      $PR/data.bin (file, 134217728 (128.0 MiB); 128 MiB from offset 0, read only)$" <<<"$out" &&
	ok "probe normal: target line" || bad "probe: $out"
grep -q '^backend    uring (AUTO: ' <<<"$out" && ok "probe normal: backend line" || bad "probe: $out"
grep -qE '^verdict    (fast|ok|slow|unstable|unknown): ' <<<"$out" && ok "probe normal: verdict line" || bad "probe: $out"
# The VM case (vm-case.sh) checks the probe in JSON only: the text report's other lines here.
grep -q '^ceiling    ' <<<"$out" && ok "probe normal: ceiling line" || bad "probe: $out"
[ "$(grep -cE '^ +(256 KiB|2 MiB|16 MiB) +[18] +[0-9.]+ +[0-9]+' <<<"$out")" = 6 ] &&
	grep -q '^loads      object' <<<"$out" && ok "probe normal: loads table, 6 rows" || bad "probe: $out"
check "probe normal: load rows" "$(grep -cE '^ +(256 KiB|2 MiB|16 MiB) +[18] ' <<<"$out")" 6
err=$("$K" probe "$PR/missing.bin" 2>&1); rc=$?
check "probe missing file" "$err (rc $rc)" \
	"kvblkctl: probe: $PR/missing.bin: No such file or directory (give --write to create a scratch file) (rc 1)"
head -c $((1 << 20)) /dev/zero >"$PR/small.bin"
err=$("$K" probe "$PR/small.bin" 2>&1); rc=$?
check "probe small file" "$err (rc $rc)" \
	"kvblkctl: probe: $PR/small.bin: 1048576 bytes, the probe reads 134217728: give --write to write a scratch file of that size first (rc 1)"
err=$("$K" probe /dev/null 2>&1); rc=$?
check "probe char device" "$err (rc $rc)" "kvblkctl: probe: /dev/null: neither a block device nor a regular file (rc 1)"
"$K" probe --seconds 0 "$PR/small.bin" >/dev/null 2>&1
check "probe --seconds 0 (exit)" "$?" 2
probe_json=$("$K" -o json probe --seconds 1 "$PR/data.bin" 2>/dev/null)
rm -f "$PR/data.bin" "$PR/small.bin"

# --- trace -------------------------------------------------------------------
# Captured lines (Linux 6.1 trace_pipe; one overflow notice): 2 batches.
cat >"$T/trace.txt" <<'EOT'
# tracer: nop
      kmod_smoke-245     [001] .....    35.000000: kvblk_batch_start: dev=259:0 batch=1 descs=2 cmds=3 bytes=393216
      kmod_smoke-245     [001] .....    35.000010: kvblk_cmd_submit: dev=259:0 batch=1 tag=0x100 obj=0 slba=0 bytes=131072 hwq=1
      kmod_smoke-245     [001] .....    35.000012: kvblk_cmd_submit: dev=259:0 batch=1 tag=0x100 obj=0 slba=32 bytes=131072 hwq=1
      kmod_smoke-245     [001] .....    35.000020: kvblk_cmd_submit: dev=259:0 batch=1 tag=0x200 obj=1 slba=64 bytes=131072 hwq=1
          <idle>-0       [001] d.h1.    35.000100: kvblk_cmd_complete: dev=259:0 batch=1 tag=0x100 obj=0 slba=0 bytes=131072 hwq=1 status=0 lat_ns=90000
          <idle>-0       [001] d.h1.    35.000150: kvblk_cmd_complete: dev=259:0 batch=1 tag=0x200 obj=1 slba=64 bytes=131072 hwq=1 status=0 lat_ns=130000
          <idle>-0       [001] d.h1.    35.000160: kvblk_cmd_complete: dev=259:0 batch=1 tag=0x100 obj=0 slba=32 bytes=131072 hwq=1 status=0 lat_ns=148000
      kmod_smoke-245     [001] .....    35.000170: kvblk_batch_end: dev=259:0 batch=1 descs=2 ok=2 cmds=3 elapsed_ns=170000 ret=2
CPU:0 [LOST 2 EVENTS]
      kmod_smoke-245     [000] .....    36.000000: kvblk_batch_start: dev=259:0 batch=2 descs=1 cmds=1 bytes=4096
      kmod_smoke-245     [000] .....    36.000005: kvblk_cmd_submit: dev=259:0 batch=2 tag=0x300 obj=0 slba=99 bytes=4096 hwq=0
 kworker/0:1H-77     [000] d.s1.    36.000055: kvblk_cmd_complete: dev=259:0 batch=2 tag=0x300 obj=0 slba=99 bytes=4096 hwq=0 status=0 lat_ns=50000
      kmod_smoke-245     [000] .....    36.000060: kvblk_batch_end: dev=259:0 batch=2 descs=1 ok=1 cmds=1 elapsed_ns=60000 ret=1
EOT
j=$("$K" -o json trace --input "$T/trace.txt" --out "$T/trace.json"); rc=$?
check "trace --input exit" "$rc" 0
jq_check "trace json schema_version" "$j" .schema_version 1
jq_check "trace summary counts" "$j" '.summary | "\(.events) \(.lost_events) \(.batches) \(.objects) \(.commands) \(.completions) \(.bytes)"' \
	"12 2 2 3 4 4 397312"
jq_check "trace summary checks" "$j" '.summary | "\(.unmatched_completions) \(.incomplete_commands) \(.tag_mismatches) \(.failed_commands)"' "0 0 0 0"
jq_check "trace commands per object" "$j" '.summary.commands_per_object | "\(.min) \(.max) \(.mean)"' "1 2 1.3333333333333333"
jq_check "trace objects in flight max" "$j" .summary.objects_in_flight.max 2
jq_check "trace device time" "$j" '.summary.device_time_us | "\(.count) \(.p50) \(.max)"' "4 90 148"
# Gaps between submissions: 2, 8 and 999985 us.
jq_check "trace submission gaps" "$j" '.summary.submit_gap_us | "\(.count) \(.min) \(.max | round)"' "3 2 999985"
TJ=$T/trace.json
jq_check "trace file: lost events" "$(cat "$TJ")" .otherData.lost_events 2
jq_check "trace file: slices per category" "$(cat "$TJ")" \
	'[.traceEvents[] | select(.ph == "X") | .cat] | group_by(.) | map("\(.[0])=\(length)") | join(" ")' "batch=2 command=4 object=3"
# The VM case's check: every command carries the tag of its object.
jq_check "trace file: commands with their object's tag" "$(cat "$TJ")" '
	([.traceEvents[] | select(.cat == "object") | {key: "\(.args.dev)/\(.args.batch)/\(.args.obj)", value: .args.tag}]
	 | from_entries) as $obj
	| [.traceEvents[] | select(.cat == "command") | "\(.args.tag)=\($obj["\(.args.dev)/\(.args.batch)/\(.args.obj)"])"] | join(" ")' \
	"0x100=0x100 0x100=0x100 0x200=0x200 0x300=0x300"
jq_check "trace file: hw queue tracks" "$(cat "$TJ")" \
	'[.traceEvents[] | select(.ph == "M" and .name == "thread_name" and .pid == 3) | .args.name] | sort | join(",")' \
	"hwq 0,hwq 1,hwq 1 #2,hwq 1 #3"
jq_check "trace file: counter peak and end" "$(cat "$TJ")" \
	'[.traceEvents[] | select(.ph == "C")] | "\(map(.args.commands) | max) \(last.args.commands) \(last.args.objects)"' "3 0 0"
out=$("$K" trace --input "$T/trace.txt" --out "$T/trace2.json")
grep -q '^recorded   2 batches, 3 objects, 4 commands, 397312 (388.0 KiB)$' <<<"$out" && ok "trace normal: recorded" || bad "trace: $out"
grep -q '^WARNING    2 events lost' <<<"$out" && ok "trace normal: lost warning" || bad "trace: $out"
grep -q '^  command device time    n=4  p50 90.0  p90 148.0  p99 148.0  max 148.0  mean 104.5 us$' <<<"$out" &&
	ok "trace normal: device time" || bad "trace: $out"
printf '  x-1 [000] ..... 1.0: kvblk_cmd_submit: dev=259:0 batch=1 tag=zz\n' >"$T/bad.txt"
err=$("$K" trace --input "$T/bad.txt" --out "$T/bad.json" 2>&1 >/dev/null); rc=$?
check "trace: a line not understood" "$err (rc $rc)" \
	"kvblkctl: trace: 1 lines not understood, first: kvblk_cmd_submit: bad value in 'tag=zz':   x-1 [000] ..... 1.0: kvblk_cmd_submit: dev=259:0 batch=1 tag=zz (rc 0)"
# The fields kvblk.ko's events carry since they name the engine: dir, tgt and
# engine per command, dir per batch, engines and tgts at a batch's end (the
# format of kmod/trace.h; one batch over a PRP and a block-layer target).
cat >"$T/trace-engines.txt" <<'EOT'
      kmod_trace-300     [000] .....    40.000000: kvblk_batch_start: dev=259:0 batch=7 dir=load descs=2 cmds=2 bytes=262144
      kmod_trace-300     [000] .....    40.000010: kvblk_cmd_submit: dev=259:0 batch=7 dir=load tgt=0 engine=prp tag=0x10 obj=0 slba=0 bytes=131072 hwq=1
      kmod_trace-300     [000] .....    40.000012: kvblk_cmd_submit: dev=259:0 batch=7 dir=load tgt=1 engine=bio tag=0x11 obj=1 slba=32 bytes=131072 hwq=0
          <idle>-0       [000] d.h1.    40.000100: kvblk_cmd_complete: dev=259:0 batch=7 dir=load tgt=0 engine=prp tag=0x10 obj=0 slba=0 bytes=131072 hwq=1 status=0 lat_ns=90000
          <idle>-0       [000] d.s1.    40.000120: kvblk_cmd_complete: dev=259:0 batch=7 dir=load tgt=1 engine=bio tag=0x11 obj=1 slba=32 bytes=131072 hwq=0 status=0 lat_ns=108000
      kmod_trace-300     [000] .....    40.000130: kvblk_batch_end: dev=259:0 batch=7 dir=load engines=prp|bio tgts=2 descs=2 ok=2 cmds=2 elapsed_ns=120000 ret=2
EOT
j=$("$K" -o json trace --input "$T/trace-engines.txt" --out "$T/trace-engines.json"); rc=$?
check "trace engines: exit" "$rc" 0
jq_check "trace engines: summary" "$j" '.summary | "\(.batches) \(.objects) \(.commands) \(.completions) \(.unmatched_completions) \(.tag_mismatches)"' \
	"1 2 2 2 0 0"
jq_check "trace engines: batch args" "$(cat "$T/trace-engines.json")" \
	'[.traceEvents[] | select(.cat == "batch") | .args | "\(.dir) \(.engines) \(.tgts)"] | join(",")' "load prp|bio 2"
jq_check "trace engines: object args" "$(cat "$T/trace-engines.json")" \
	'[.traceEvents[] | select(.cat == "object") | .args | "\(.tag)=\(.tgt)/\(.engine)/\(.dir)"] | sort | join(" ")' \
	"0x10=0/prp/load 0x11=1/bio/load"
jq_check "trace engines: command args" "$(cat "$T/trace-engines.json")" \
	'[.traceEvents[] | select(.cat == "command") | .args | "\(.tag)=\(.tgt)/\(.engine)/\(.dir)/hwq\(.hwq)"] | sort | join(" ")' \
	"0x10=0/prp/load/hwq1 0x11=1/bio/load/hwq0"
# Lines of a kvblk.ko without these fields leave them out of the args.
jq_check "trace without engine fields: no engine args" "$(cat "$TJ")" \
	'[.traceEvents[] | select(.ph == "X") | .args | has("engine") or has("dir") or has("engines") or has("tgt")] | any' false
printf '  x-1 [000] ..... 1.0: kvblk_cmd_submit: dev=259:0 batch=1 dir=sideways tag=0x1\n' >"$T/bad-dir.txt"
err=$("$K" trace --input "$T/bad-dir.txt" --out "$T/bad.json" 2>&1 >/dev/null); rc=$?
check "trace: a direction not understood" "$err (rc $rc)" \
	"kvblkctl: trace: 1 lines not understood, first: kvblk_cmd_submit: bad value in 'dir=sideways':   x-1 [000] ..... 1.0: kvblk_cmd_submit: dev=259:0 batch=1 dir=sideways tag=0x1 (rc 0)"
# Recording: no tracefs, no kvblk events; the instance is removed on error.
err=$(KVBLK_TRACEFS=$T/none "$K" trace --seconds 1 --out "$T/x.json" 2>&1); rc=$?
check "trace without tracefs" "$err (rc $rc)" "kvblkctl: trace: \$KVBLK_TRACEFS=$T/none is not a tracefs (no instances/) (rc 1)"
mkdir -p "$T/tracefs/instances" "$T/tracefs/events/sched"
err=$(KVBLK_TRACEFS=$T/tracefs "$K" trace --seconds 1 --out "$T/x.json" 2>&1); rc=$?
check "trace without kvblk events" "$err (rc $rc)" \
	"kvblkctl: trace: no kvblk events in $T/tracefs/events: is kvblk.ko loaded? (rc 1)"
mkdir -p "$T/tracefs/events/kvblk"	# the root has them, the new instance (a plain dir here) not
err=$(KVBLK_TRACEFS=$T/tracefs "$K" trace --out "$T/x.json" -- true 2>&1); rc=$?
check "trace: instance without events" "$err (rc $rc)" \
	"kvblkctl: trace: no kvblk events in $T/tracefs/events: is kvblk.ko loaded? (rc 1)"
check "trace: no instance left" "$(ls "$T/tracefs/instances" | wc -l)" 0
err=$("$K" trace --out "$T/x.json" 2>&1); rc=$?
check "trace without a mode" "$err (rc $rc)" "kvblkctl: trace: give --seconds N, -- COMMAND [ARGS...] or --input FILE (rc 1)"
"$K" trace --seconds 1 --out "$T/x.json" -- true >/dev/null 2>&1
check "trace --seconds with COMMAND (exit)" "$?" 2
err=$("$K" trace --input "$T/trace.txt" --out /nonexistent/t.json 2>&1); rc=$?
check "trace unwritable --out" "$err (rc $rc)" "kvblkctl: trace: /nonexistent/t.json: No such file or directory (rc 1)"

# --- JSON schema 1: the exact keys of every document ------------------------
keys() { jq -r "$1 | keys_unsorted | join(\",\")"; }
check "schema: list" "$("$K" -o json list | keys .)" "schema_version,module,namespaces,backends"
check "schema: list.namespaces[]" "$("$K" -o json list | keys .namespaces[0])" "name,attached,nsid,lba_size,pci_dev"
check "schema: list.backends[]" "$("$K" -o json list | keys .backends[0])" "name,available,reason"
check "schema: stats" "$("$K" -o json stats | keys .)" "schema_version,devices"
check "schema: stats.devices[]" "$("$K" -o json stats nvme0n1 | keys .devices[0])" \
	"device,counters,cmd_latency_us,batch_latency_us"
check "schema: stats.devices[].counters" "$("$K" -o json stats nvme0n1 | keys .devices[0].counters)" \
	"batches,batches_interrupted,objects,objects_failed,commands,bytes,bytes_written,errors_io,errors_media,errors_transport,errors_other,inflight,inflight_peak"
check "schema: stats histogram" "$("$K" -o json stats nvme0n1 | jq -r '.devices[0].cmd_latency_us | "\(length) \(.[0] | keys_unsorted | join(","))"')" \
	"32 lower_us,count"
check "schema: stats.devices[].rates" "$(keys .devices[0].rates <"$T/watch.json")" \
	"interval_s,objects_per_s,commands_per_s,bytes_per_s,gb_per_s"
check "schema: tune get" "$("$K" -o json tune get | keys .)" "schema_version,module_loaded,tunables"
check "schema: tune get.tunables[]" "$("$K" -o json tune get | keys .tunables[0])" \
	"scope,name,value,min,max,align,default,unit"
check "schema: tune set" "$("$K" -o json tune set --dry-run nvme0n1 max_descs 8 | keys .)" \
	"schema_version,scope,name,old_value,value,dry_run"
check "schema: crossover" "$("$K" -o json crossover --load-gbps 1 | keys .)" "schema_version,load_gbps,load_source,results"
check "schema: crossover.results[]" "$("$K" -o json crossover --load-gbps 1 | keys .results[0])" \
	"model,layers,kv_heads,head_dim,dtype_bytes,tokens,tp,bytes_per_chunk,bytes_per_rank,recompute_tokens_per_s,recompute_source,load_s,recompute_s,ratio,verdict"

check "schema: probe" "$(keys . <<<"$probe_json")" \
	"schema_version,path,kind,capacity,span_bytes,wrote,scratch_file_removed,backend,backend_reason,data_path,logical_block_size,queue_depth,max_cmd_bytes,registered_buffer,seconds,ceiling,loads,sizes,verdict,verdict_ratio,verdict_reason,thresholds"
check "schema: probe.ceiling" "$(keys .ceiling <<<"$probe_json")" "available,program,version,block_bytes,gbps,queue_depth,note,rounds,spread,max_spread,stable,points"
check "schema: probe.ceiling.points[]" "$(keys .ceiling.points[0] <<<"$probe_json")" "queue_depth,ok,gbps,error"
check "schema: probe.loads[]" "$(keys .loads[0] <<<"$probe_json")" \
	"object_bytes,objects_per_call,calls,bytes,commands,seconds,gbps,of_ceiling"
check "schema: probe.sizes[]" "$(keys .sizes[0] <<<"$probe_json")" "object_bytes,best_gbps,of_ceiling"
tj=$("$K" -o json trace --input "$T/trace.txt" --out "$T/trace.json")
check "schema: trace" "$(keys . <<<"$tj")" "schema_version,trace_file,tracefs,input,command,command_status,interrupted,summary"
check "schema: trace.summary" "$(keys .summary <<<"$tj")" \
	"events,lost_events,duration_us,batches,objects,commands,completions,bytes,unmatched_completions,incomplete_commands,tag_mismatches,failed_commands,commands_per_object,objects_in_flight,commands_in_flight,in_flight_over_time,submit_gap_us,device_time_us"
check "schema: trace.summary.in_flight_over_time[]" "$(keys .summary.in_flight_over_time[0] <<<"$tj")" \
	"start_us,end_us,objects_max,objects_mean,commands_max"
check "schema: trace.summary.device_time_us" "$(keys .summary.device_time_us <<<"$tj")" "count,min,p50,p90,p99,max,mean"
check "schema: trace file" "$(keys . <"$T/trace.json")" "traceEvents,displayTimeUnit,otherData"
check "schema: trace file command args" "$(jq -r '[.traceEvents[] | select(.cat == "command")][0] | "\(keys_unsorted | join(",")) \(.args | keys_unsorted | join(","))"' "$T/trace.json")" \
	"ph,cat,name,pid,tid,ts,dur,args dev,batch,obj,tag,slba,bytes,hwq,status,lat_ns"
check "schema: trace file object args" "$(jq -r '[.traceEvents[] | select(.cat == "object")][0].args | keys_unsorted | join(",")' "$T/trace.json")" \
	"dev,batch,obj,tag,commands"

# --- global ------------------------------------------------------------------
"$K" -o yaml list >/dev/null 2>&1
check "-o yaml refused (exit)" "$?" 2
"$K" >/dev/null 2>&1
check "no subcommand (exit)" "$?" 2
# Output captured before grep -q: under pipefail its early exit would SIGPIPE the writer.
out=$("$K" docs tunables)
grep -q '^| `max_inflight` | 1..65536 | 256 | commands |' <<<"$out" && ok "docs tunables row" || bad "docs tunables"
out=$("$K" --help)
grep -q docs <<<"$out" && bad "docs subcommand shown in --help" || ok "docs subcommand hidden"

echo "kvblkctl host tests: $pass passed, $fails failed"
[ "$fails" -eq 0 ]
