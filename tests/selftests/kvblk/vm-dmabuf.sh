#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# VM case (tests/vm/cases.list): the dma-buf selftests (kvblk_dmabuf_test.c)
# against the guest's emulated namespace ($KVBLK_TEST_DEVICE). Loads the
# test-only exporter (tests/kmod-exporters/kvblk_test_dmabuf.ko, built for
# the guest's kernel next to kvblk.ko) and then kvblk.ko, runs the program,
# and unloads both: kvblk first (it imports the exporter's dma-bufs), then
# the exporter. Either rmmod failing fails the case (something leaked).
# Exit: the program's (0 pass, 4 skip, else fail), or 1 when a module does
# not load or unload.
. "$(dirname "$0")/../../vm/cases/lib.sh"
set +e

bin=${KVBLK_DMABUF_BIN:-build-selftests/kvblk/kvblk_dmabuf_test}
exporter=${KVBLK_TEST_DMABUF_KO:-${KVBLK_VM_KBUILD:-$KVBLK_SRC}/tests/kmod-exporters/kvblk_test_dmabuf.ko}
[ -x "$bin" ] || skip "$bin not built (make -C tests/selftests/kvblk)"
[ -f "${KVBLK_KO:-}" ] || skip "kvblk.ko not built (make -C kmod)"
[ -f "$exporter" ] || skip "$exporter not built (make -C tests/kmod-exporters)"

[ -e /sys/module/kvblk_test_dmabuf ] && fail "kvblk_test_dmabuf is already loaded"
insmod "$exporter" || fail "insmod $exporter"
loaded_kvblk=0
if [ ! -e /sys/module/kvblk ]; then
	insmod "$KVBLK_KO" || { rmmod kvblk_test_dmabuf; fail "insmod $KVBLK_KO"; }
	loaded_kvblk=1
fi

"$bin"
rc=$?

if [ $loaded_kvblk = 1 ] && ! rmmod kvblk; then
	echo "FAIL: rmmod kvblk after the dma-buf tests (a context or buffer leaked?)" >&2
	rc=1
fi
if ! rmmod kvblk_test_dmabuf; then
	echo "FAIL: rmmod kvblk_test_dmabuf (a dma-buf or attachment leaked?)" >&2
	rc=1
fi
exit $rc
