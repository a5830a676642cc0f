#!/bin/bash
# SPDX-License-Identifier: MIT
# blkdebug variant: exactly the LBA at $KVBLK_VM_BAD_BYTE_OFFSET fails (any
# read covering it), its neighbours and the rest read exact bytes, and the
# kernel logs the media error at that sector.
# QEMU completes the NVMe Read with Unrecovered Read Error (SCT 0x2, SC 0x81);
# the 6.1 block layer turns that into BLK_STS_MEDIUM, which read(2) reports
# as ENODATA ("No data available"), not EIO.
. "$(dirname "$0")/lib.sh"

[ -n "${KVBLK_VM_BAD_BYTE_OFFSET:-}" ] || skip "variant $KVBLK_VM_VARIANT injects no error"
dev=$KVBLK_TEST_DEVICE lba=$KVBLK_VM_LBA bad=$KVBLK_VM_BAD_BYTE_OFFSET

expect_fail 'No data available' \
	dd if="$dev" of=/dev/null iflag=direct bs="$lba" skip=$((bad / lba)) count=1
expect_fail 'No data available' \
	dd if="$dev" of=/dev/null iflag=direct,skip_bytes bs=128K skip=$((bad > 65536 ? bad - 65536 : 0)) count=1
dd if="$dev" of=/dev/null iflag=direct bs="$lba" skip=$((bad / lba + 1)) count=1 status=none ||
	fail "dd of the LBA after the bad one failed"
ok "dd of the next LBA succeeds"

pattern check "$dev" -o "$bad" -l "$lba" -e ENODATA
pattern check "$dev" -o $((bad - lba)) -l "$lba"		# LBA just before
pattern check "$dev" -o $((bad + lba)) -l "$lba"		# LBA just after
far=0
[ "$bad" -ge $((32 << 20)) ] || far=$((bad + (16 << 20)))
pattern check "$dev" -o "$far" -l 16M			# far away
# 2 MiB around it, one LBA per read: exactly one read fails.
around=$((bad > (1 << 20) ? bad - (1 << 20) : 0))
out=$(pattern check "$dev" -o "$around" -l 2M -b "$lba" -e ENODATA)
echo "$out"
[[ $out == *" 1 failed with "* ]] || fail "want exactly 1 failed read in 2 MiB around the bad LBA"

sector=$((bad / 512))
# Not `dmesg | grep -q`: under pipefail grep's early exit makes dmesg die of SIGPIPE.
grep -q "critical medium error, dev $(basename "$dev"), sector $sector " <<<"$(dmesg)" ||
	fail "no 'critical medium error ... sector $sector' in dmesg"
ok "kernel logged the media error at sector $sector"
