#!/bin/bash
# SPDX-License-Identifier: MIT
#
# with-modules.sh MODULES COMMAND: how the in-guest runner (guest-run.sh) runs
# a case whose NEEDS name modules (load:NAME). Loads MODULES ('+'-separated,
# in that order: kvblk from $KVBLK_KO, any other from
# $KVBLK_VM_KBUILD/tests/kmod-exporters/NAME.ko), runs `bash -c COMMAND`, and
# unloads them in reverse order. Exit: COMMAND's (0 pass, 4 skip, else fail),
# or 1 when a module was loaded before the case, does not load, is gone after
# the case (the case left it unloaded) or does not unload (a context, buffer
# or reference leaked).
set -u
IFS=+ read -ra mods <<<"$1"
cmd=$2

ko() {
	case $1 in
	kvblk) echo "$KVBLK_KO" ;;
	*) echo "$KVBLK_VM_KBUILD/tests/kmod-exporters/$1.ko" ;;
	esac
}

# rmmod MODULE, once more (up to 3 times, 1 s apart) when rmmod itself could
# not run (exit status 127: its binary or libc could not be loaded; seen once
# through the guest's 9p root right after the debug kernel's fault-injection
# fuzz). A module that refuses to go fails at once.
unload() {
	local try rc
	for try in 1 2 3; do
		rmmod "$1"
		rc=$?
		[ $rc = 127 ] || return $rc
		echo "note: rmmod $1 could not run (exit status 127), try $try of 3" >&2
		sleep 1
	done
	return $rc
}

loaded=()
unload_all() {	# unloads what this script loaded, newest first; 1 when one stays
	local i r=0 m
	for ((i = ${#loaded[@]} - 1; i >= 0; i--)); do
		m=${loaded[i]}
		if [ ! -e "/sys/module/$m" ]; then
			echo "FAIL: $m.ko is not loaded after the case (the case left it unloaded)" >&2
			r=1
		elif ! unload "$m"; then
			echo "FAIL: rmmod $m after the case (a context, buffer or reference leaked?)" >&2
			r=1
		fi
	done
	return $r
}

for m in "${mods[@]}"; do
	if [ -e "/sys/module/$m" ]; then
		echo "FAIL: $m.ko is loaded before the case (an earlier case left it)" >&2
		unload_all
		exit 1
	fi
	if ! insmod "$(ko "$m")"; then
		echo "FAIL: insmod $(ko "$m")" >&2
		unload_all
		exit 1
	fi
	loaded+=("$m")
done

bash -c "$cmd"
rc=$?
unload_all || rc=1
exit $rc
