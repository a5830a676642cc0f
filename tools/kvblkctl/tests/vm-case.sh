#!/bin/bash
# SPDX-License-Identifier: MIT
#
# kvblkctl against kvblk.ko in the test VM (tests/vm, case "kvblkctl"):
# `info` must equal the nvme driver's sysfs view and the variant's geometry,
# and its SMART bytes read must move by what dd and kvblk read;
# a context held attached keeps /sys/kernel/kvblk/<disk> alive while
# kmod_smoke loads batches through a second one; then `kvblkctl -o json
# stats` must equal every sysfs file and be non-zero, the command latency
# histogram must count every command, `tune set` + `tune get` must round-trip
# through the kernel, out-of-range values must be refused, and `list` must
# show the module, its version, the namespace and the kmod backend;
# `crossover --measure` reads the namespace.
# `probe` loads through kvblk.ko (AUTO) and the namespace's counters move by
# exactly its commands; `trace -- kmod_smoke` writes a trace whose commands
# all carry their object's tag and number the counter's delta, each a load of
# target 0 through the bio engine (batches: load, engines bio, 1 target); ^C ends a
# trace early and its tracefs instance goes; with the module gone, `trace`
# says so.
# Finds kvblkctl in $KVBLKCTL, else the newest of build/, build-h1/ and ../build-ctl/.
# shellcheck source=tests/vm/cases/lib.sh
. "$(dirname "$0")/../../../tests/vm/cases/lib.sh"

K=${KVBLKCTL:-}
if [ -z "$K" ]; then
	# The newest build of the usual build folders.
	K=$({ ls -t build/tools/kvblkctl/kvblkctl build-h1/tools/kvblkctl/kvblkctl ../build-ctl/tools/kvblkctl/kvblkctl 2>/dev/null || true; } | head -1)
fi
[ -n "$K" ] && [ -x "$K" ] || skip "kvblkctl not built (cmake --build build --target kvblkctl, or set KVBLKCTL)"
SMOKE=tests/kmod-smoke/kmod_smoke
[ -x "$SMOKE" ] || skip "$SMOKE not built (make -C tests/kmod-smoke)"
DEV=${KVBLK_TEST_DEVICE:-/dev/nvme0n1}
DISK=$(basename "$DEV")
SYS=/sys/kernel/kvblk/$DISK
echo "kvblkctl: $K, device $DEV"

holder=
cleanup() {
	if [ -n "$holder" ]; then kill "$holder" 2>/dev/null; wait "$holder" 2>/dev/null || true; fi
	rmmod kvblk 2>/dev/null || true
}
trap cleanup EXIT
insmod "$KVBLK_KO" || fail "insmod $KVBLK_KO"

# info (libnvme admin commands) equals what the nvme driver exposes.
CTRL=/sys/block/$DISK/device
j=$("$K" -o json info "$DEV")
"$K" info "$DEV"
expect_eq "info: schema_version" "$(jq .schema_version <<<"$j")" 1
expect_eq "info: model" "$(jq -r .model <<<"$j")" "$(sed 's/ *$//' "$CTRL/model")"
expect_eq "info: serial" "$(jq -r .serial <<<"$j")" "$(sed 's/ *$//' "$CTRL/serial")"
expect_eq "info: firmware" "$(jq -r .firmware <<<"$j")" "$(sed 's/ *$//' "$CTRL/firmware_rev")"
expect_eq "info: nsid" "$(jq .nsid <<<"$j")" "$(cat "/sys/block/$DISK/nsid")"
expect_eq "info: mdts" "$(jq '"\(.mdts) \(.mdts_bytes)"' -r <<<"$j")" "$KVBLK_VM_MDTS $KVBLK_VM_MAX_CMD_BYTES"
expect_eq "info: LBA size in use" "$(jq '.lba_formats[] | select(.in_use) | .lba_size' <<<"$j")" "$KVBLK_VM_LBA"
expect_eq "info: capacity" "$(jq '.nsze_lbas * (.lba_formats[] | select(.in_use) | .lba_size)' <<<"$j")" "$KVBLK_VM_DISK_BYTES"
expect_eq "info: blk-mq hw queues" "$(jq .blk_mq_hw_queues <<<"$j")" "$(find "/sys/block/$DISK/mq" -mindepth 1 -maxdepth 1 -type d | wc -l)"
expect_eq "info: io queues >= hw queues" "$(jq '.io_queues.submission >= .blk_mq_hw_queues and .io_queues.completion >= .blk_mq_hw_queues' <<<"$j")" true
expect_eq "info: bytes_read = units x 512000" "$(jq '.smart.bytes_read == .smart.data_units_read * 512000' <<<"$j")" true
r0=$(jq .smart.bytes_read <<<"$j")
dd if="$DEV" of=/dev/null bs=1M count=64 iflag=direct status=none || fail "dd"
r1=$("$K" -o json info "$DEV" | jq .smart.bytes_read)
d=$((r1 - r0))
# 64 MiB read; the controller counts in 512000-byte units, rounded up
[ "$d" -ge $((67108864 - 512000)) ] && [ "$d" -le $((67108864 + 512000)) ] ||
	fail "info: SMART bytes read moved by $d after reading 64 MiB"
ok "info: SMART bytes read moved by $d after reading 67108864"

# Loaded, no namespace yet.
j=$("$K" -o json list)
expect_eq "list: module" "$(jq -r '"\(.module.loaded) \(.module.version)"' <<<"$j")" \
	"true $(cat /sys/module/kvblk/version)"
expect_eq "list: namespaces before attach" "$(jq '.namespaces | length' <<<"$j")" 0
expect_eq "list: kmod backend" "$(jq -r '.backends[] | select(.name == "kmod") | .available' <<<"$j")" true

# A context that stays attached (kmod_smoke sleeping before its loads).
KMOD_SMOKE_HOLD=3600 "$SMOKE" "$DEV" >"$KVBLK_VM_CASE_DIR/holder.log" 2>&1 &
holder=$!
for _ in $(seq 100); do [ -d "$SYS" ] && break; sleep 0.1; done
[ -d "$SYS" ] || fail "$SYS did not appear"
j=$("$K" -o json list)
expect_eq "list: namespace" "$(jq -r '[.namespaces[] | "\(.name) \(.attached) \(.lba_size)"] | join(",")' <<<"$j")" \
	"$DISK 1 $KVBLK_VM_LBA"
"$K" list

# Load batches through a second context.
"$SMOKE" "$DEV" >"$KVBLK_VM_CASE_DIR/smoke.log" 2>&1 || { tail -20 "$KVBLK_VM_CASE_DIR/smoke.log"; fail "kmod_smoke"; }
ok "kmod_smoke: $(tail -1 "$KVBLK_VM_CASE_DIR/smoke.log")"

# Nothing runs now: the counters are still, so kvblkctl must equal sysfs.
j=$("$K" -o json stats "$DEV")
expect_eq "stats: schema_version" "$(jq .schema_version <<<"$j")" 1
expect_eq "stats: device" "$(jq -r '.devices[0].device' <<<"$j")" "$DISK"
for f in "$SYS"/stats/*; do
	n=$(basename "$f")
	case $n in *_latency_us)
		want=$(awk '{printf "%s%s:%s", (NR > 1 ? " " : ""), $1, $2}' "$f")
		expect_eq "stats: $n" "$(jq -r "[.devices[0].${n}[] | \"\\(.lower_us):\\(.count)\"] | join(\" \")" <<<"$j")" "$want"
		continue
	esac
	expect_eq "stats: $n" "$(jq ".devices[0].counters.$n" <<<"$j")" "$(cat "$f")"
done
for n in batches objects commands bytes inflight_peak; do
	[ "$(jq ".devices[0].counters.$n" <<<"$j")" -gt 0 ] || fail "stats: $n is 0 after kmod_smoke"
done
ok "stats: batches, objects, commands, bytes, inflight_peak non-zero"
expect_eq "stats: inflight" "$(jq .devices[0].counters.inflight <<<"$j")" 0
expect_eq "stats: cmd_latency_us counts every command" \
	"$(jq '[.devices[0].cmd_latency_us[].count] | add' <<<"$j")" "$(jq .devices[0].counters.commands <<<"$j")"
# The device's own count of bytes read saw kvblk's passthrough reads too.
r2=$("$K" -o json info "$DEV" | jq .smart.bytes_read)
kb=$(jq .devices[0].counters.bytes <<<"$j")
[ $((r2 - r1)) -ge $((kb - 512000)) ] || fail "info: SMART bytes read moved by $((r2 - r1)), kvblk read $kb"
ok "info: SMART bytes read moved by $((r2 - r1)) >= kvblk's $kb bytes (kmod_smoke also preads)"
"$K" stats "$DISK"
j=$("$K" -o json stats "$DISK" --watch 1)
expect_eq "stats --watch: no load, 0 commands/s" "$(jq .devices[0].rates.commands_per_s <<<"$j")" 0
expect_fail 'reset: not supported by this kvblk.ko' "$K" stats "$DISK" --reset

# Tunables through the kernel.
old=$(cat "$SYS/max_inflight")
"$K" tune set "$DISK" max_inflight 17
expect_eq "tune set: sysfs" "$(cat "$SYS/max_inflight")" 17
expect_eq "tune get: value" "$("$K" -o json tune get "$DISK" max_inflight | jq '.tunables[0].value')" 17
expect_fail 'max_inflight=0 out of range 1..65536' "$K" tune set "$DISK" max_inflight 0
expect_eq "tune set refused: sysfs untouched" "$(cat "$SYS/max_inflight")" 17
"$K" tune set "$DISK" max_inflight "$old"
expect_eq "tune set back" "$(cat "$SYS/max_inflight")" "$old"
"$K" tune set module max_descs 1000
expect_eq "tune set module: parameter" "$(cat /sys/module/kvblk/parameters/max_descs)" 1000
"$K" tune set module max_descs 4096
"$K" tune get
# A batch still works with the tunables the module read back.
"$K" tune set "$DISK" max_inflight 1
"$SMOKE" "$DEV" >"$KVBLK_VM_CASE_DIR/smoke-qd1.log" 2>&1 || fail "kmod_smoke with max_inflight 1"
expect_eq "inflight_peak unchanged by a max_inflight 1 run" "$("$K" -o json stats "$DISK" | jq .devices[0].counters.inflight_peak)" \
	"$(jq .devices[0].counters.inflight_peak <<<"$j")"
"$K" tune set "$DISK" max_inflight "$old"

# probe: load_many through kvblk.ko (AUTO) vs fio's ceiling, read only, under `trace` (the
# Perfetto example of docs/kvblkctl.md): one probe (about 45 s under TCG) for both. Its text
# report is checked on the host (tests/host-test.sh).
PJ=$KVBLK_VM_CASE_DIR/probe.json
c0=$(cat "$SYS/stats/commands")
"$K" trace --out "$KVBLK_VM_CASE_DIR/probe-trace.json" -- sh -c 'exec "$0" -o json probe --seconds 1 "$1" >"$2"' \
	"$K" "$DEV" "$PJ" >"$KVBLK_VM_CASE_DIR/probe-trace.txt" 2>&1 ||
	{ cat "$KVBLK_VM_CASE_DIR/probe-trace.txt" "$PJ"; fail "trace -- probe -o json"; }
c1=$(cat "$SYS/stats/commands")
cat "$KVBLK_VM_CASE_DIR/probe-trace.txt"
pj=$(cat "$PJ")
jq -c '{verdict, verdict_reason, backend, max_cmd_bytes, ceiling_gbps: .ceiling.gbps, loads: [.loads[] | [.object_bytes, .objects_per_call, .gbps, .commands]]}' <<<"$pj"
expect_eq "probe: backend" "$(jq -r .backend <<<"$pj")" kmod
expect_eq "probe: data path" "$(jq -r .data_path <<<"$pj")" host
expect_eq "probe: read only" "$(jq -r '"\(.wrote) \(.kind)"' <<<"$pj")" "false block_device"
expect_eq "probe: span" "$(jq .span_bytes <<<"$pj")" "$KVBLK_VM_DISK_BYTES"
expect_eq "probe: command size" "$(jq .max_cmd_bytes <<<"$pj")" "$KVBLK_VM_MAX_CMD_BYTES"
expect_eq "probe: 6 load points, all moving" "$(jq '[.loads[] | select(.gbps > 0 and .calls > 0)] | length' <<<"$pj")" 6
expect_eq "probe: fio ceiling" "$(jq -r '"\(.ceiling.available) \(.ceiling.block_bytes)"' <<<"$pj")" \
	"true $KVBLK_VM_MAX_CMD_BYTES"
# A verdict only from a stable ceiling (its rounds within the bound); under TCG fio's rounds
# often spread wider, and then the verdict is "unstable" with the spread given.
expect_eq "probe: verdict follows the ceiling's stability" "$(jq -r 'if .ceiling.stable
	then (.verdict | IN("fast", "ok", "slow"))
	else (.verdict == "unstable" and (.verdict_reason | test("ceiling was unstable: rounds .* spread")))
	end' <<<"$pj")" true
expect_eq "probe: module's commands = probe's" "$((c1 - c0))" "$(jq '[.loads[].commands] | add' <<<"$pj")"
# One jq over the trace (thousands of commands: seconds under TCG): the commands, and those
# outside the object their tag names (probe tags each object with its byte offset).
read -r ncmd nout <<<"$(jq -r --argjson lba "$KVBLK_VM_LBA" '
	def hex: ltrimstr("0x") | explode | reduce .[] as $c (0; . * 16 + (if $c >= 97 then $c - 87 else $c - 48 end));
	[.traceEvents[] | select(.cat == "command")] as $c
	| "\($c | length) \([$c[] | (.args.slba * $lba - (.args.tag | hex)) as $d
	   | select($d < 0 or $d + .args.bytes > 16777216)] | length)"' "$KVBLK_VM_CASE_DIR/probe-trace.json")"
expect_eq "trace -- probe: commands = sysfs delta" "$ncmd" "$((c1 - c0))"
expect_eq "trace -- probe: commands outside the object their tag names" "$nout" 0
# trace: every command carries its object's tag; the count equals the module's.
TR=$KVBLK_VM_CASE_DIR/trace.json
c0=$(cat "$SYS/stats/commands")
"$K" trace --out "$TR" -- "$SMOKE" "$DEV" >"$KVBLK_VM_CASE_DIR/trace.txt" 2>&1 ||
	{ cat "$KVBLK_VM_CASE_DIR/trace.txt"; fail "trace -- kmod_smoke"; }
c1=$(cat "$SYS/stats/commands")
cat "$KVBLK_VM_CASE_DIR/trace.txt"
ncmd=$(jq '[.traceEvents[] | select(.cat == "command")] | length' "$TR")
[ "$ncmd" -gt 0 ] || fail "trace: no commands"
expect_eq "trace: commands = sysfs commands delta" "$ncmd" "$((c1 - c0))"
expect_eq "trace: commands whose tag is not their object's" "$(jq '
	([.traceEvents[] | select(.cat == "object") | {key: "\(.args.dev)/\(.args.batch)/\(.args.obj)", value: .args.tag}]
	 | from_entries) as $obj
	| [.traceEvents[] | select(.cat == "command")
	   | select(.args.tag != $obj["\(.args.dev)/\(.args.batch)/\(.args.obj)"])] | length' "$TR")" 0
expect_eq "trace: commands in objects = commands" "$(jq '[.traceEvents[] | select(.cat == "object") | .args.commands] | add' "$TR")" "$ncmd"
expect_eq "trace: lost events" "$(jq .otherData.lost_events "$TR")" 0
expect_eq "trace: hwq tracks" "$(jq '[.traceEvents[] | select(.cat == "command") | .args.hwq] | unique | length > 0' "$TR")" true
# kmod_smoke attaches the namespace without a flag: the bio engine serves every object, loads only.
expect_eq "trace: commands' target/engine/direction" \
	"$(jq -r '[.traceEvents[] | select(.cat == "command") | "\(.args.tgt)/\(.args.engine)/\(.args.dir)"] | unique | join(",")' "$TR")" "0/bio/load"
expect_eq "trace: batches' direction/engines/targets" \
	"$(jq -r '[.traceEvents[] | select(.cat == "batch") | "\(.args.dir)/\(.args.engines)/\(.args.tgts)"] | unique | join(",")' "$TR")" "load/bio/1"
expect_eq "trace: counter back to 0" "$(jq '[.traceEvents[] | select(.ph == "C")] | last | .args.commands' "$TR")" 0
grep -q "^recorded .* $((c1 - c0)) commands" "$KVBLK_VM_CASE_DIR/trace.txt" || fail "trace: summary count"
grep -q "^checks     0 unmatched completions, 0 incomplete commands, 0 tag mismatches" "$KVBLK_VM_CASE_DIR/trace.txt" ||
	fail "trace: summary checks"
ok "trace: $ncmd commands, each with its object's tag"
# -o json summary, --seconds, and SIGINT ending the recording early.
"$K" -o json trace --seconds 30 --out "$KVBLK_VM_CASE_DIR/idle.json" >"$KVBLK_VM_CASE_DIR/idle.txt" &
tpid=$!
# Wait for the instance (kvblkctl makes it once its SIGINT handler is set): up to 20 s, as a
# loaded TCG guest takes seconds to start it (a fixed 2 s failed once under host load).
for _ in $(seq 200); do
	ls -d /sys/kernel/tracing/instances/kvblkctl-* >/dev/null 2>&1 && break
	sleep 0.1
done
ls -d /sys/kernel/tracing/instances/kvblkctl-* >/dev/null 2>&1 || fail "trace: no tracefs instance while recording"
kill -INT "$tpid"
wait "$tpid" || fail "trace: SIGINT exit $?"
expect_eq "trace ^C: interrupted, nothing recorded" \
	"$(jq -r '"\(.interrupted) \(.summary.commands)"' "$KVBLK_VM_CASE_DIR/idle.txt")" "true 0"
expect_eq "trace ^C: trace file" "$(jq '.traceEvents | type' "$KVBLK_VM_CASE_DIR/idle.json")" '"array"'
expect_eq "trace: tracefs instances left" "$(ls -d /sys/kernel/tracing/instances/kvblkctl-* 2>/dev/null | wc -l)" 0
expect_fail 'kvblkctl: trace: false exited with status 1' "$K" trace --out "$KVBLK_VM_CASE_DIR/f.json" -- false

# crossover --measure on the namespace itself (read only, BLKGETSIZE64)
j=$("$K" -o json crossover --model llama-3.1-8b --measure "$DEV" --measure-seconds 1)
expect_eq "crossover --measure $DEV" "$(jq '"\(.load_gbps > 0) \(.load_source | startswith("measured on '"$DEV"': 4 threads x 1 MiB O_DIRECT"))"' -r <<<"$j")" "true true"
jq -r .load_source <<<"$j"

kill "$holder"; wait "$holder" 2>/dev/null || true; holder=
for _ in $(seq 50); do [ -d "$SYS" ] || break; sleep 0.1; done
expect_eq "list: namespace gone after detach" "$("$K" -o json list | jq '.namespaces | length')" 0
rmmod kvblk || fail "rmmod kvblk"
expect_eq "list: module unloaded" "$("$K" -o json list | jq .module.loaded)" false
expect_fail 'no kvblk events in .*: is kvblk.ko loaded\?' "$K" trace --seconds 1 --out "$KVBLK_VM_CASE_DIR/none.json"
ok "kvblkctl VM case"
