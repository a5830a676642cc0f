#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# VM case (tests/vm/cases.list): ATTACH and REGISTER_BUFFER write their
# results back to the caller's struct without faulting while they hold the
# context's lock (review L5; kmod/uabi.c, kvblk_copy_out_locked(), after a
# write of the struct before the lock). tests/selftests/kvblk/kvblk_copyout_fault
# puts each ioctl's struct on a write-protected userfaultfd page, holds the
# ioctl's write fault, and meanwhile calls CHECK_BUFFER (looked up under
# ctx->lock) on the same context: it must return while the fault is held.
# Had the ioctl faulted with the lock held, CHECK_BUFFER would wait for it
# until the fault is served: the helper reports that as FAIL after 5 s and
# then serves the fault, so the case ends either way. Root: userfaultfd
# faults of kernel accesses need it (vm.unprivileged_userfaultfd).
. "$(dirname "$0")/../../vm/cases/lib.sh"

dev=${KVBLK_TEST_DEVICE:-/dev/nvme0n1}
[ -b "$dev" ] || skip "$dev is not a block device"
[ -c /dev/kvblk ] || skip "kvblk.ko not loaded"
helper=$KVBLK_SRC/build-selftests/kvblk/kvblk_copyout_fault
[ -x "$helper" ] || skip "$helper not built"

rc=0
timeout -k 5 60 "$helper" "$dev" || rc=$?
case $rc in
0) ok "ATTACH and REGISTER_BUFFER: their copy-out faulted before ctx->lock, never under it" ;;
4) skip "kvblk_copyout_fault skipped" ;;
124 | 137) fail "kvblk_copyout_fault hung (killed after 60 s)" ;;
*) fail "kvblk_copyout_fault exited with $rc" ;;
esac
