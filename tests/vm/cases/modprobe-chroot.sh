#!/bin/bash
# SPDX-License-Identifier: MIT
# Modules outside the initramfs load from the chroot with the host's modprobe
# (here null_blk), and unload cleanly.
. "$(dirname "$0")/lib.sh"

modprobe null_blk nr_devices=1 gb=1 || fail "modprobe null_blk"
[ -b /dev/nullb0 ] || fail "/dev/nullb0 did not appear"
dd if=/dev/nullb0 of=/dev/null bs=1M count=4 iflag=direct status=none || fail "read /dev/nullb0"
rmmod null_blk || fail "rmmod null_blk"
ok "null_blk loaded, read and unloaded"
