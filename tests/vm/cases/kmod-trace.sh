#!/bin/bash
# SPDX-License-Identifier: MIT
# kvblk's tracepoints attribute every command to its object, target, engine
# and direction. With the kvblk events enabled, kmod_smoke's batches and
# kmod_trace's (tests/kmod-smoke/kmod_trace.c: bio, PRP and file engine
# loads, a load over four targets, stores through the bio and file engines,
# a refused store) must leave one kvblk_cmd_submit and one
# kvblk_cmd_complete per command, each completion carrying the tag, batch
# and object of a submission, and the batch_end lines' cmds= must add up to
# the number of submissions. For every object of kmod_trace, each command
# event carries the target, engine and direction asked for and their number
# is the object's commands; each of its batches' kvblk_batch_start carries
# the direction, its kvblk_batch_end the direction, the engines and the
# number of targets asked for, its descriptors and commands; a refused batch
# leaves no event. kmod_trace's stores go to scratch space only: a loop
# device over a file in /tmp and a file on ext4 on another loop device.
. "$(dirname "$0")/lib.sh"

T=/sys/kernel/tracing
[ -d $T/events ] || skip "tracefs not mounted at $T"
smoke=tests/kmod-smoke/kmod_smoke
tracer=tests/kmod-smoke/kmod_trace
[ -x $smoke ] || skip "$smoke not built"
[ -x $tracer ] || skip "$tracer not built"
[ -d $T/events/kvblk ] || fail "no kvblk events in $T/events"

scratch=$(mktemp -d /tmp/kvblk-trace.XXXXXX)
raw=
cleanup() {
	set +e
	echo 0 >$T/events/kvblk/enable
	ext4_scratch_undo "$scratch"
	[ -n "$raw" ] && losetup -d "$raw"
	rm -rf "$scratch"
}
trap cleanup EXIT

# Scratch targets: a file on ext4 (the file engine) and a raw loop device
# (the bio engine), both written by kmod_trace's stores.
ext4_scratch "$scratch"
head -c 16M /dev/urandom >"$scratch/mnt/obj" || fail "write $scratch/mnt/obj"
sync
truncate -s 32M "$scratch/raw.img"
raw=$(losetup --find --show "$scratch/raw.img") || fail "losetup $scratch/raw.img"

echo 0 >$T/tracing_on
echo >$T/trace
echo 8192 >$T/buffer_size_kb
echo 1 >$T/events/kvblk/enable
echo 1 >$T/tracing_on
$smoke "$KVBLK_TEST_DEVICE" >/dev/null || fail "kmod_smoke failed"
# The expectations and the trace are kept with the case's log.
keep=${KVBLK_VM_CASE_DIR:-$scratch}
expect=$keep/kmod_trace.expect
$tracer "$KVBLK_TEST_DEVICE" "$raw" "$scratch/mnt/obj" >"$expect" || fail "kmod_trace failed"
echo 0 >$T/tracing_on
trace=$keep/trace.txt
cat $T/trace >"$trace"
grep -q 'LOST' "$trace" && fail "trace buffer overflowed"

# Fields are key=value; the key of a completion is batch/obj/tag/slba.
counts=$(awk '
	function field(k,   i) { for (i = 1; i <= NF; i++) if (index($i, k "=") == 1) return substr($i, length(k) + 2); return "" }
	/kvblk_cmd_submit:/   { s++; key[field("batch") "/" field("obj") "/" field("tag") "/" field("slba")]++ }
	/kvblk_cmd_complete:/ { c++; k = field("batch") "/" field("obj") "/" field("tag") "/" field("slba")
				if (key[k]-- <= 0) u++
				if (field("status") != "0") bs++ }
	/kvblk_cmd_(submit|complete):/ { if (field("engine") !~ /^(prp|bio|file)$/ || field("dir") !~ /^(load|store)$/ ||
					     field("tgt") !~ /^[0-9]+$/) bf++ }
	/kvblk_batch_end:/    { b++; bc += field("cmds") }
	END { printf "%d %d %d %d %d %d %d\n", s, c, u, bs, bc, b, bf }' "$trace")
read -r submits completes unmatched bad_status batch_cmds batches bad_fields <<<"$counts"
[ "$batches" -gt 0 ] || fail "no kvblk_batch_end events"
[ "$submits" -gt 0 ] || fail "no kvblk_cmd_submit events"
expect_eq "completions" "$completes" "$submits"
expect_eq "submissions" "$submits" "$batch_cmds"
expect_eq "completions without a matching submission" "$unmatched" 0
# kmod_smoke's batches all succeed except one rejected before submission.
expect_eq "completions with non-zero status" "$bad_status" 0
expect_eq "command events without engine, dir or tgt" "$bad_fields" 0

# kmod_trace's objects and batches against what it asked for.
verdict=$(awk '
	function field(k,   i) { for (i = 1; i <= NF; i++) if (index($i, k "=") == 1) return substr($i, length(k) + 2); return "" }
	function bad(msg) { if (nbad++ < 5) print "# " msg > "/dev/stderr" }
	FNR == NR {
		t = field("tag")
		if ($2 == "obj") { o_tgt[t] = field("tgt"); o_eng[t] = field("engine"); o_dir[t] = field("dir"); o_cmds[t] = field("cmds"); nobj++ }
		else if ($2 == "batch") { b_dir[t] = field("dir"); b_eng[t] = field("engines"); b_tgts[t] = field("tgts")
					  b_descs[t] = field("descs"); b_cmds[t] = field("cmds"); nbatch++ }
		else if ($2 == "none") { none[t] = 1; nnone++ }
		next
	}
	/kvblk_cmd_(submit|complete):/ {
		t = field("tag")
		if (t in none) bad("an event for an object of a refused batch: " $0)
		if (!(t in o_tgt)) next
		ev = /kvblk_cmd_submit:/ ? "submit" : "complete"
		n[ev, t]++
		if (field("tgt") != o_tgt[t] || field("engine") != o_eng[t] || field("dir") != o_dir[t])
			bad("want tgt=" o_tgt[t] " engine=" o_eng[t] " dir=" o_dir[t] ": " $0)
		if (ev == "submit") batch_of[t] = field("batch")
		next
	}
	/kvblk_batch_start:/ { id = field("batch"); s_dir[id] = field("dir") }
	/kvblk_batch_end:/ {
		id = field("batch"); e_seen[id] = 1; e_dir[id] = field("dir"); e_eng[id] = field("engines")
		e_tgts[id] = field("tgts"); e_descs[id] = field("descs"); e_ok[id] = field("ok"); e_cmds[id] = field("cmds")
	}
	END {
		for (t in o_tgt)
			if (n["submit", t] != o_cmds[t] || n["complete", t] != o_cmds[t])
				bad("tag " t ": " n["submit", t] + 0 " submissions, " n["complete", t] + 0 " completions, want " o_cmds[t])
		for (t in b_dir) {
			id = batch_of[t]
			if (id == "" || !(id in e_seen) || !(id in s_dir)) { bad("batch of tag " t ": no batch_start/end"); continue }
			if (s_dir[id] != b_dir[t])
				bad("batch " id " start: dir=" s_dir[id] ", want " b_dir[t])
			if (e_dir[id] != b_dir[t] || e_eng[id] != b_eng[t] || e_tgts[id] != b_tgts[t] ||
			    e_descs[id] != b_descs[t] || e_ok[id] != b_descs[t] || e_cmds[id] != b_cmds[t])
				bad("batch " id " end: dir=" e_dir[id] " engines=" e_eng[id] " tgts=" e_tgts[id] " descs=" e_descs[id] \
				    " ok=" e_ok[id] " cmds=" e_cmds[id] ", want dir=" b_dir[t] " engines=" b_eng[t] " tgts=" b_tgts[t] \
				    " descs=ok=" b_descs[t] " cmds=" b_cmds[t])
		}
		printf "%d %d %d %d\n", nobj, nbatch, nnone, nbad
	}' "$expect" "$trace")
read -r objs obj_batches refused mismatches <<<"$verdict"
# kmod_trace: 14 objects in 6 batches, and a refused batch of 2.
expect_eq "kmod_trace objects" "$objs" 14
expect_eq "kmod_trace batches" "$obj_batches" 6
expect_eq "kmod_trace refused objects" "$refused" 2
expect_eq "kmod_trace events not as asked" "$mismatches" 0
grep -q 'engines=prp|bio|file tgts=4' "$trace" || fail "no batch_end with engines=prp|bio|file tgts=4"
ok "$batches batches, $submits commands: every completion carries its object's tag; $objs objects' commands their target, engine and direction"
