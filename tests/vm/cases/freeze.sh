#!/bin/bash
# SPDX-License-Identifier: MIT
# A system freeze (suspend's first step) while a process waits in a long
# LOAD_MANY (review L8): kvblk's waits are killable and freezable, so the
# freezer freezes the process in the middle of its batch and the freeze
# succeeds; the batch then completes exact after the thaw.
#
# The freeze is PM_DEBUG's test mode (/sys/power/pm_test = freezer: freeze
# every task, wait 5 s, thaw; nothing is suspended), with pm_freeze_timeout
# a quarter of what the batch takes alone (measured first), so that a task
# the freezer cannot freeze inside the batch fails the freeze ("Freezing of
# tasks failed", the write to /sys/power/state -EBUSY).
. "$(dirname "$0")/lib.sh"

hold=tests/kmod-smoke/kmod_hold
[ -x "$hold" ] || skip "$hold not built"
P=/sys/power
[ -w $P/pm_test ] && grep -qw freezer $P/pm_test || skip "no $P/pm_test (CONFIG_PM_DEBUG)"
grep -qw freeze $P/state || skip "no freeze in $P/state"
dev=$KVBLK_TEST_DEVICE
max=/sys/kernel/kvblk/${dev##*/}/max_inflight
slow="echo 1 >$max"
objs="0:4K*4096"
timeout0=$(cat $P/pm_freeze_timeout)
trap 'echo none >$P/pm_test; echo $timeout0 >$P/pm_freeze_timeout' EXIT

t0=$(date +%s%N)
$hold -e prp -r "$slow" "$dev" "$objs" >/dev/null || fail "the batch alone"
ms=$((($(date +%s%N) - t0) / 1000000))
[ $ms -ge 800 ] || skip "the batch took $ms ms alone: too short to tell"
echo "the batch alone: $ms ms; pm_freeze_timeout $((ms / 4)) ms"

echo freezer >$P/pm_test
echo $((ms / 4)) >$P/pm_freeze_timeout
log=$KVBLK_VM_CASE_DIR/hold.log
$hold -e prp -r "$slow" -D "sleep 0.1" "$dev" "$objs" >"$log" 2>&1 &
pid=$!
# -D runs its command once the batch's commands move: the batch is in flight.
for ((i = 0; i < 200; i++)); do
	grep -q "^run: sleep" "$log" && break
	sleep 0.05
done
grep -q "^run: sleep" "$log" || fail "the batch did not start"
if ! echo freeze >$P/state; then
	wait $pid
	dmesg | grep -E "Freezing|refusing to freeze|task:" | tail -5
	fail "the freeze failed while a process waited in a batch"
fi
ok "froze and thawed all tasks while a process waited in a LOAD_MANY"
wait $pid || { cat "$log"; fail "the batch after the thaw"; }
grep -q "^PASS" "$log" || fail "kmod_hold: $(tail -3 "$log")"
ok "the batch completed exact after the thaw"
