#!/bin/bash
# SPDX-License-Identifier: MIT
# Reads the namespace with fio (O_DIRECT, io_uring on the block device and
# io_uring_cmd on the generic char device) and checks every byte against the
# pattern with kvblk-pattern: whole device, random LBA-aligned ranges, and a
# buffered pass.
. "$(dirname "$0")/lib.sh"

dev=$KVBLK_TEST_DEVICE
bs=$KVBLK_VM_MAX_CMD_BYTES
fio_run() {
	fio --output-format=terse --terse-version=3 --minimal --direct=1 \
		--ioengine=io_uring --iodepth=8 --size=32M --group_reporting "$@" |
		awk -F';' '{ printf "fio %s: %d KiB read, %d KiB/s, errors %s\n", $3, $6, $7, $5 }
			   $5 != 0 || $6 == 0 { bad = 1 } END { exit bad }'
}
fio_run --name=seq-blk --filename="$dev" --rw=read --bs="$bs"
fio_run --name=rand-blk --filename="$dev" --rw=randread --bs="$KVBLK_VM_LBA" --size=4M
fio_run --name=seq-ng --filename="$KVBLK_TEST_NGDEV" --ioengine=io_uring_cmd --cmd_type=nvme --direct=0 \
	--rw=read --bs="$bs"

pattern check "$dev" -b 1M
pattern check "$dev" -b 1M -o "$KVBLK_VM_LBA" -l 32M	# every read straddles commands
pattern check "$dev" -r 200 -b $((4 * bs)) -s 7		# 1 LBA .. 4 commands
pattern check "$dev" -B -o 1M -l 8M -b 64K		# page cache path
