#!/bin/bash
# SPDX-License-Identifier: MIT
#
# kvblkctl on the host, against a fake sysfs/dev tree under a temp dir
# (KVBLK_SYSFS_ROOT, KVBLK_DEV_ROOT): every printed value equals the file it
# came from, JSON parses and carries its schema keys, bad tunable values are
# refused with the range and the file untouched, crossover numbers equal
# hand-computed ones. usage: host-test.sh PATH/TO/kvblkctl
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
	[commands]=6789 [bytes]=123456789012 [errors_io]=3 [errors_media]=4
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
		"KVBLK_CTRL_PAGE_SIZE (8U << 20) (1U << 20)"
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

# --- JSON schema 1: the exact keys of every document ------------------------
keys() { jq -r "$1 | keys_unsorted | join(\",\")"; }
check "schema: list" "$("$K" -o json list | keys .)" "schema_version,module,namespaces,backends"
check "schema: list.namespaces[]" "$("$K" -o json list | keys .namespaces[0])" "name,attached,nsid,lba_size,pci_dev"
check "schema: list.backends[]" "$("$K" -o json list | keys .backends[0])" "name,available,reason"
check "schema: stats" "$("$K" -o json stats | keys .)" "schema_version,devices"
check "schema: stats.devices[]" "$("$K" -o json stats nvme0n1 | keys .devices[0])" \
	"device,counters,cmd_latency_us,batch_latency_us"
check "schema: stats.devices[].counters" "$("$K" -o json stats nvme0n1 | keys .devices[0].counters)" \
	"batches,batches_interrupted,objects,objects_failed,commands,bytes,errors_io,errors_media,errors_transport,errors_other,inflight,inflight_peak"
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

# --- global ------------------------------------------------------------------
"$K" -o yaml list >/dev/null 2>&1
check "-o yaml refused (exit)" "$?" 2
"$K" >/dev/null 2>&1
check "no subcommand (exit)" "$?" 2
"$K" docs tunables | grep -q '^| `max_inflight` | 1..65536 | 256 | commands |' && ok "docs tunables row" || bad "docs tunables"
"$K" --help | grep -q docs && bad "docs subcommand shown in --help" || ok "docs subcommand hidden"

echo "kvblkctl host tests: $pass passed, $fails failed"
[ "$fails" -eq 0 ]
