#!/bin/bash
# SPDX-License-Identifier: MIT
# kvblk.ko loads against the guest's nvme driver, creates /dev/kvblk, and
# unloads cleanly (any kernel warning fails the case through the dmesg scan).
. "$(dirname "$0")/lib.sh"

[ -f "$KVBLK_KO" ] || skip "$KVBLK_KO not built (make -C kmod)"
insmod "$KVBLK_KO" || fail "insmod $KVBLK_KO"
[ -c /dev/kvblk ] || { rmmod kvblk; fail "/dev/kvblk did not appear"; }
ok "/dev/kvblk is there"
rmmod kvblk || fail "rmmod kvblk"
[ ! -e /dev/kvblk ] || fail "/dev/kvblk is still there after rmmod"
ok "kvblk unloaded"
