#!/bin/bash
# SPDX-License-Identifier: MIT
#
# In-guest case runner (the host's bash, in `chroot /host`, started by
# guest-init.sh). Runs every case of $KVBLK_VM_RESULTS/cases.tsv
# (name<TAB>timeout<TAB>modules<TAB>command) in order, from the repository
# root, each under `timeout`, with stdin /dev/null and stdout+stderr in
# cases/NAME.log; a case with modules ('+'-separated, from its NEEDS load:NAME,
# else "-") runs through with-modules.sh, which loads them around it.
# Around each case it writes "kvblk-vm: START NAME" / "kvblk-vm: END NAME rc=N"
# to /dev/kmsg so that the host can attribute kernel messages to cases, and
# it saves the whole kernel log to dmesg.txt after each case.
#
# Files it writes in $KVBLK_VM_RESULTS: started (guest uptime when the runner
# began), cases/NAME.rc ("rc<TAB>seconds<TAB>status", status ok|timeout|hung),
# cases/NAME.d/ (the case's scratch folder; kmemleak.txt where a scan found
# leaks), dmesg.txt, current (the case that runs now), done.
set -u
# guest-init.sh exported the run's settings (guest.env) into our environment.
res=$KVBLK_VM_RESULTS
cd "$KVBLK_SRC" || exit 1

kmsg() { echo "kvblk-vm: $*" >/dev/kmsg; }

mkdir -p "$res/cases"
cut -d' ' -f1 /proc/uptime >"$res/started"
kmsg "runner started, variant $KVBLK_VM_VARIANT"

# Where the kernel has kmemleak (the debug kernel): a scan after each case,
# before its END line, so that kmemleak's "N new suspected memory leaks" line
# fails that case (run-suite.sh), its report kept in cases/NAME.d/kmemleak.txt;
# then the reported objects are cleared. What the boot left is cleared before
# the first case. Objects younger than 5 s are not reported yet: they show at
# the next scan, and the last case gets a final one 6 s after it ends.
leak=/sys/kernel/debug/kmemleak
[ -w "$leak" ] || leak=
leak_scan() {	# [report file]
	[ -n "$leak" ] || return 0
	echo scan >"$leak"
	if [ -n "${1:-}" ]; then
		cat "$leak" >"$1"
		[ -s "$1" ] || rm -f "$1"
	fi
	echo clear >"$leak"
}
leak_scan

while IFS=$'\t' read -r name tmo mods cmd <&3; do
	[ -n "$name" ] || continue
	[ "$mods" = - ] || cmd="tests/vm/with-modules.sh $mods $(printf '%q' "$cmd")"
	dir=$res/cases/$name.d
	mkdir -p "$dir"
	export KVBLK_VM_CASE=$name KVBLK_VM_CASE_DIR=$dir KVBLK_VM_CASE_TIMEOUT=$tmo
	echo "$name" >"$res/current"	# run-vm.sh watches it: a guest stuck in a case
	kmsg "START $name"
	t0=${EPOCHREALTIME/./}	# microseconds, without a fork (~0.1 s each here)
	timeout -k 5 "$tmo" bash -c "$cmd" </dev/null >"$res/cases/$name.log" 2>&1 &
	pid=$!
	# A watchdog for a case stuck in the kernel, which timeout cannot kill
	# (task in D state): then dump the blocked tasks to the log and go on.
	sleep $((tmo + 15)) &
	watchdog=$!
	wait -n -p done_pid "$pid" "$watchdog"
	rc=$?
	if [ "$done_pid" = "$watchdog" ]; then
		echo w >/proc/sysrq-trigger
		rc=125 status=hung
	else
		kill "$watchdog" 2>/dev/null
		wait "$watchdog" 2>/dev/null
		status=ok
		case $rc in 124 | 137) status=timeout ;; esac
	fi
	t=$((${EPOCHREALTIME/./} - t0))
	leak_scan "$dir/kmemleak.txt"
	last=$name
	kmsg "END $name rc=$rc"
	printf '%s\t%d.%02d\t%s\n' "$rc" $((t / 1000000)) $((t % 1000000 / 10000)) "$status" \
		>"$res/cases/$name.rc"
	dmesg >"$res/dmesg.txt"
done 3<"$res/cases.tsv"
if [ -n "$leak" ] && [ -n "${last:-}" ]; then
	sleep 6
	leak_scan "$res/cases/$last.d/kmemleak-final.txt"
fi

sync
sleep 0.2
dmesg >"$res/dmesg.txt"
touch "$res/done"
