#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# VM case (tests/vm/cases.list): the CUDA (nvidia-p2p) provider of kvblk.ko
# against the test-only stand-in for nvidia.ko, kvblk_fake_nvp2p.ko
# (tests/kmod-exporters), with kvblk_cuda_test.c:
#   1. kvblk.ko alone: CUDA registrations fail with EOPNOTSUPP and
#      GET_FEATURES lacks KVBLK_FEAT_MEM_CUDA (KVBLK_CUDA_EXPECT=absent);
#   2. the fake module loaded after kvblk.ko (the symbols are looked up per
#      registration): every CUDA test, persistent and callback variants
#      (KVBLK_CUDA_EXPECT=present);
#   3. no symbol reference is left (the fake module's refcnt is 0), and both
#      modules unload.
# Needs both modules unloaded at the start. Exit: 0 pass, 4 skip, else fail.
. "$(dirname "$0")/../../vm/cases/lib.sh"
set +e

bin=${KVBLK_CUDA_BIN:-build-selftests/kvblk/kvblk_cuda_test}
fake=${KVBLK_FAKE_NVP2P_KO:-${KVBLK_VM_KBUILD:-.}/tests/kmod-exporters/kvblk_fake_nvp2p.ko}
[ -x "$bin" ] || skip "$bin not built (make -C tests/selftests/kvblk)"
[ -f "${KVBLK_KO:-}" ] || skip "kvblk.ko not built (make -C kmod)"
[ -f "$fake" ] || skip "$fake not built (make -C tests/kmod-exporters)"
[ -e /sys/module/kvblk ] && fail "kvblk.ko is already loaded"
[ -e /sys/module/kvblk_fake_nvp2p ] && fail "kvblk_fake_nvp2p.ko is already loaded"

# run PHASE: the program must pass (a phase where everything skips fails).
run() {
	KVBLK_CUDA_EXPECT=$1 "$bin"
	local r=$?
	[ $r = 0 ] || echo "FAIL: kvblk_cuda_test, phase $1: exit $r" >&2
	return $r
}

rc=0
insmod "$KVBLK_KO" || fail "insmod $KVBLK_KO"
run absent || rc=1
if insmod "$fake"; then
	run present || rc=1
	refs=$(cat /sys/module/kvblk_fake_nvp2p/refcnt)
	if [ "$refs" != 0 ]; then
		echo "FAIL: kvblk_fake_nvp2p refcnt is $refs after the tests (a symbol reference leaked)" >&2
		rc=1
	fi
else
	echo "FAIL: insmod $fake" >&2
	rc=1
fi
rmmod kvblk || { echo "FAIL: rmmod kvblk" >&2; rc=1; }
if [ -e /sys/module/kvblk_fake_nvp2p ] && ! rmmod kvblk_fake_nvp2p; then
	echo "FAIL: rmmod kvblk_fake_nvp2p" >&2
	rc=1
fi
exit $rc
