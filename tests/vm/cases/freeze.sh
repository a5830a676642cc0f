#!/bin/bash
# SPDX-License-Identifier: MIT
# A system freeze (suspend's first step) while a process waits in a long
# LOAD_MANY (review L8): kvblk's waits are killable and freezable, so the
# freezer freezes the process in the middle of its batch and the freeze
# succeeds; the batch then completes exact after the thaw.
#
# The freeze is PM_DEBUG's test mode (/sys/power/pm_test = freezer: freeze
# every task, wait 5 s, thaw; nothing is suspended), with pm_freeze_timeout
# 2 s, while a PRP batch of 32,768 commands (4 KiB each, max_inflight 1:
# tens of seconds under TCG) runs: a task the freezer cannot freeze inside
# the batch fails the freeze ("Freezing of tasks failed", the write to
# /sys/power/state -EBUSY). The batch must still be running after the
# freeze, else the case proves nothing and fails.
. "$(dirname "$0")/lib.sh"

hold=tests/kmod-smoke/kmod_hold
[ -x "$hold" ] || skip "$hold not built"
P=/sys/power
[ -w $P/pm_test ] && grep -qw freezer $P/pm_test || skip "no $P/pm_test (CONFIG_PM_DEBUG)"
grep -qw freeze $P/state || skip "no freeze in $P/state"
dev=$KVBLK_TEST_DEVICE
param=/sys/module/kvblk/parameters/max_cmd_bytes
max=/sys/kernel/kvblk/${dev##*/}/max_inflight
timeout0=$(cat $P/pm_freeze_timeout)
cmd0=$(cat $param)
trap 'echo none >$P/pm_test; echo $timeout0 >$P/pm_freeze_timeout; echo $cmd0 >$param' EXIT

echo 4096 >$param	# the disk's object takes it at attach
echo freezer >$P/pm_test
echo 2000 >$P/pm_freeze_timeout
log=$KVBLK_VM_CASE_DIR/hold.log
$hold -e prp -r "echo 1 >$max" -D "true" "$dev" "0:32K*4096" >"$log" 2>&1 &
pid=$!
# -D runs its command once the batch's commands move: the batch is in flight.
for ((i = 0; i < 600; i++)); do
	grep -q "^run: true" "$log" && break
	sleep 0.05
done
grep -q "^run: true" "$log" || fail "the batch did not start"
if ! echo freeze >$P/state; then
	wait $pid
	dmesg | grep -E "Freezing|refusing to freeze|task:" | tail -5
	fail "the freeze failed while a process waited in a batch"
fi
kill -0 $pid 2>/dev/null || fail "the batch ended before the freeze: the case proves nothing"
ok "froze and thawed all tasks while a process waited in a LOAD_MANY"
wait $pid || { tail -20 "$log"; fail "the batch after the thaw"; }
grep -q "^PASS" "$log" || fail "kmod_hold: $(tail -3 "$log")"
ok "the batch completed exact after the thaw"
