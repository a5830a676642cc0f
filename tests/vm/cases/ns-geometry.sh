#!/bin/bash
# SPDX-License-Identifier: MIT
# The namespace the variant promised: LBA size, command size limit (MDTS),
# capacity, queues, the generic char device, and the IOMMU when asked for.
. "$(dirname "$0")/lib.sh"

dev=$KVBLK_TEST_DEVICE
q=/sys/block/${dev##*/}/queue
[ -b "$dev" ] || fail "$dev is not a block device"
[ -c "$KVBLK_TEST_NGDEV" ] || fail "$KVBLK_TEST_NGDEV is not a char device"

expect_eq logical_block_size "$(<"$q"/logical_block_size)" "$KVBLK_VM_LBA"
expect_eq physical_block_size "$(<"$q"/physical_block_size)" "$KVBLK_VM_LBA"
expect_eq "blockdev --getss" "$(blockdev --getss "$dev")" "$KVBLK_VM_LBA"
expect_eq max_hw_sectors_kb "$(<"$q"/max_hw_sectors_kb)" $((KVBLK_VM_MAX_CMD_BYTES / 1024))
expect_eq "capacity (bytes)" $(($(<"${q%/queue}"/size) * 512)) "$KVBLK_VM_DISK_BYTES"

# The controller itself, through nvme-cli over the host's root: the one of
# the data namespace (nvme1 when a second controller probed first).
ctrl=${dev##*/}
ctrl=${ctrl%n[0-9]*}
mdts=$(nvme id-ctrl "/dev/$ctrl" | awk '$1 == "mdts" { print $3 }')
expect_eq "id-ctrl mdts" "$mdts" "$KVBLK_VM_MDTS"
lbads=$(nvme id-ns "$dev" | awk '/in use/ { for (i = 1; i <= NF; i++) if ($i ~ /^lbads:/) { split($i, a, ":"); print a[2] } }')
expect_eq "id-ns LBA size (2^lbads)" $((1 << lbads)) "$KVBLK_VM_LBA"

mq=("${q%/queue}"/mq/*)
nq=${#mq[@]}
if [ "$nq" -lt 1 ] || [ "$nq" -gt "$KVBLK_VM_QPAIRS" ]; then
	fail "$nq blk-mq hardware queues, want 1..$KVBLK_VM_QPAIRS"
fi
ok "$nq blk-mq hardware queues"

group=/sys/class/nvme/$ctrl/device/iommu_group
if [ "$KVBLK_VM_IOMMU" = 1 ]; then
	[ -e $group ] || fail "IOMMU variant, but the NVMe PCI function has no iommu_group"
	grep -q 'DMAR: IOMMU enabled' <<<"$(dmesg)" || fail "no 'DMAR: IOMMU enabled' in dmesg"
	expect_eq "iommu domain type" "$(<$group/type)" DMA
	ok "NVMe PCI function in an IOMMU group"
else
	[ ! -e $group ] || fail "no-IOMMU variant, but the NVMe PCI function has an iommu_group"
	ok "no IOMMU"
fi
