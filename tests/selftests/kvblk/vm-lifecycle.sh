#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# VM case (tests/vm/cases.list): the kvblk lifecycle and error selftests
# (kvblk_lifecycle_test.c) against the guest's emulated namespace
# ($KVBLK_TEST_DEVICE). Loads kvblk.ko unless it is loaded. Several tests
# rmmod it and load it again from $KVBLK_KO; this script requires it to be
# loaded when the program ends, and unloads it when it loaded it.
# Exit: the program's (0 pass, 4 skip, else fail), or 1 when kvblk.ko is
# missing afterwards or does not unload.
. "$(dirname "$0")/../../vm/cases/lib.sh"
set +e

bin=${KVBLK_LIFECYCLE_BIN:-build-selftests/kvblk/kvblk_lifecycle_test}
[ -x "$bin" ] || skip "$bin not built (make -C tests/selftests/kvblk)"
[ -f "${KVBLK_KO:-}" ] || skip "kvblk.ko not built (make -C kmod)"
export KVBLK_KO

loaded_before=0
if [ -e /sys/module/kvblk ]; then
	loaded_before=1
else
	insmod "$KVBLK_KO" || fail "insmod $KVBLK_KO"
fi

"$bin"
rc=$?

if [ ! -e /sys/module/kvblk ]; then
	echo "FAIL: kvblk.ko not loaded after the tests (a test left it unloaded)" >&2
	rc=1
	[ $loaded_before = 1 ] && insmod "$KVBLK_KO"
elif [ $loaded_before = 0 ] && ! rmmod kvblk; then
	echo "FAIL: rmmod kvblk after the lifecycle tests (a context or buffer leaked?)" >&2
	rc=1
fi
exit $rc
