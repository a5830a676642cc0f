#!/bin/bash
# SPDX-License-Identifier: MIT
# kvblk's tracepoints attribute every NVMe command to its object: with the
# kvblk events enabled, kmod_smoke's batches must leave one kvblk_cmd_submit
# and one kvblk_cmd_complete per command, each completion carrying the tag,
# batch and object of a submission, and the batch_end lines' cmds= must add
# up to the number of submissions.
. "$(dirname "$0")/lib.sh"

T=/sys/kernel/tracing
[ -d $T/events ] || skip "tracefs not mounted at $T"
smoke=tests/kmod-smoke/kmod_smoke
[ -x $smoke ] || skip "$smoke not built"
trap 'echo 0 >$T/events/kvblk/enable' EXIT
[ -d $T/events/kvblk ] || fail "no kvblk events in $T/events"

echo 0 >$T/tracing_on
echo >$T/trace
echo 8192 >$T/buffer_size_kb
echo 1 >$T/events/kvblk/enable
echo 1 >$T/tracing_on
$smoke "$KVBLK_TEST_DEVICE" >/dev/null || fail "kmod_smoke failed"
echo 0 >$T/tracing_on
trace=$(mktemp)
cat $T/trace >"$trace"
grep -q 'LOST' "$trace" && fail "trace buffer overflowed"

# Fields are key=value; the key of a completion is batch/obj/tag/slba.
counts=$(awk '
	function field(k,   i) { for (i = 1; i <= NF; i++) if (index($i, k "=") == 1) return substr($i, length(k) + 2); return "" }
	/kvblk_cmd_submit:/   { s++; key[field("batch") "/" field("obj") "/" field("tag") "/" field("slba")]++ }
	/kvblk_cmd_complete:/ { c++; k = field("batch") "/" field("obj") "/" field("tag") "/" field("slba")
				if (key[k]-- <= 0) u++
				if (field("status") != "0") bs++ }
	/kvblk_batch_end:/    { b++; bc += field("cmds") }
	END { printf "%d %d %d %d %d %d\n", s, c, u, bs, bc, b }' "$trace")
read -r submits completes unmatched bad_status batch_cmds batches <<<"$counts"
rm -f "$trace"
[ "$batches" -gt 0 ] || fail "no kvblk_batch_end events"
[ "$submits" -gt 0 ] || fail "no kvblk_cmd_submit events"
expect_eq "completions" "$completes" "$submits"
expect_eq "submissions" "$submits" "$batch_cmds"
expect_eq "completions without a matching submission" "$unmatched" 0
# kmod_smoke's batches all succeed except one rejected before submission.
expect_eq "completions with non-zero status" "$bad_status" 0
ok "$batches batches, $submits commands: every completion carries its object's tag"
