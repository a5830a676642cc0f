#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Checks what run-suite.sh does with the kernel log of a case that stopped its
# guest (lib.sh): vm_report_outside_kvblk decides whether the case may run
# once more (only a report that names no kvblk code), vm_console_excerpt what
# is printed of it. testdata/soft-lockup-6.1.txt is a soft lockup in the
# shape of the CI run of 2026-12-03 (kvblkctl stuck in text_poke_bp while
# enabling a tracepoint; the stack is illustrative, that run's console had
# none):
#   - as it is: outside kvblk, though the process is kvblkctl and kvblk is in
#     "Modules linked in";
#   - with a kvblk frame in the stack, a kvblk RIP, or a frame of a helper
#     module ([kvblk_test_dmabuf]): not outside; with a kvblk frame the
#     unwinder marks unreliable ("? "): outside;
#   - with no report at all, or no log: not outside;
#   - with CR LF lines (a serial console): outside, and the excerpt has no CR;
#   - the excerpt starts at the first report and ends with the last lines.
# testdata/int3-oops-7.2.txt is a real one, the console part of case
# libkvblk-targets of a 7.2 two-ns guest (2026-12-03): an int3 left by text
# patching of the scheduler's trace sites, with a stale ("? ") kvblk frame;
# outside kvblk.
# Run by ctest (vm_stop_report); needs only bash, awk and sed.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"
log=$here/testdata/soft-lockup-6.1.txt
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fails=$((fails + 1)); }
outside() {	# name want(yes|no) log
	local got=no
	vm_report_outside_kvblk "$3" && got=yes
	if [ "$got" = "$2" ]; then ok "$1: outside kvblk $got"; else bad "$1: outside kvblk $got, want $2"; fi
}

outside "soft lockup in text_poke" yes "$log"
outside "7.2 int3 Oops in ttwu_do_activate (recorded)" yes "$here/testdata/int3-oops-7.2.txt"
sed 's/tracepoint_add_func+0x2f0\/0x3a0/kvblk_ioctl+0x2f0\/0x3a0 [kvblk]/' "$log" >"$tmp/frame.txt"
outside "a kvblk frame" no "$tmp/frame.txt"
sed 's/RIP: 0010:smp_call_function_many_cond+0x12e\/0x3c0/RIP: 0010:kvblk_slot_get+0x12e\/0x3c0 [kvblk]/' "$log" >"$tmp/rip.txt"
outside "a kvblk RIP" no "$tmp/rip.txt"
sed 's/event_enable_write+0xc6\/0x100/dmabuf_attach+0xc6\/0x100 [kvblk_test_dmabuf]/' "$log" >"$tmp/helper.txt"
outside "a frame of a kvblk helper module" no "$tmp/helper.txt"
# An unreliable frame ("? "): a stale address on the stack, as the 7.2 int3 Oops of 2026-12-03
# had for the kvblk_batch_start probe that its process had just registered.
sed 's/ ? text_poke_memset+0x20\/0x20/ ? __pfx_trace_event_raw_event_kvblk_batch_start+0x10\/0x10 [kvblk]/' "$log" >"$tmp/stale.txt"
grep -q '? __pfx_trace_event_raw_event_kvblk_batch_start' "$tmp/stale.txt" || bad "stale frame: sed did not apply"
outside "an unreliable (?) kvblk frame" yes "$tmp/stale.txt"
sed 's/ ? text_poke_memset+0x20\/0x20/ kvblk_batch_start+0x10\/0x10 [kvblk]/' "$log" >"$tmp/reliable.txt"
outside "the same frame, reliable" no "$tmp/reliable.txt"
grep -Ev 'watchdog:|rcu: INFO' "$log" >"$tmp/none.txt"
outside "no report" no "$tmp/none.txt"
outside "no log" no "$tmp/missing.txt"
sed 's/$/\r/' "$log" >"$tmp/crlf.txt"
outside "CR LF console" yes "$tmp/crlf.txt"

ex=$(vm_console_excerpt "$tmp/crlf.txt")
first=$(head -n 1 <<<"$ex") last=$(tail -n 1 <<<"$ex")
if [[ $first == *"watchdog: BUG: soft lockup - CPU#0 stuck for 190s! [kvblkctl:1556]" ]] &&
   [[ $last == *"stuck for 220s! [kvblkctl:1556]" ]] && ! grep -q $'\r' <<<"$ex" &&
   ! grep -q 'kvblk-vm: START' <<<"$ex"; then
	ok "excerpt: from the first report to the last line, no CR"
else
	bad "excerpt: first '$first', last '$last'"
fi
{ for i in $(seq 100); do echo "[ $i.0] line $i"; done; } >"$tmp/long.txt"
sed -n 1p "$log" | sed 's/START kvblkctl/noise/' >>"$tmp/long.txt"
sed -n '3,$p' "$log" >>"$tmp/long.txt"
for i in $(seq 80); do echo "[ 500.$i] after $i"; done >>"$tmp/long.txt"
ex=$(vm_console_excerpt "$tmp/long.txt")
n=$(wc -l <<<"$ex")
if [ "$n" = 69 ] && [ "$(sed -n 61p <<<"$ex")" = "[...]" ] && [ "$(tail -n 1 <<<"$ex")" = "[ 500.80] after 80" ]; then
	ok "excerpt: 60 lines of the report, [...], the last 8"
else
	bad "excerpt of a long log: $n lines, line 61 '$(sed -n 61p <<<"$ex")'"
fi
[ "$fails" = 0 ] || exit 1
