#!/bin/bash
# SPDX-License-Identifier: MIT
# The PRP engine's attach self-check (kmod/engine_prp.c, kvblk_prp_selfcheck):
# before a PRP context attaches, a Read past the namespace's end must read as
# LBA Out of Range through the load status path and a good Read as success.
#
# 1. With the real mirror of struct nvme_request the check passes: the PRP
#    attach succeeds and a batch is exact (tests/kmod-smoke/kmod_hold).
# 2. The test hook /sys/module/kvblk/parameters/test_status_offset=8 makes
#    kvblk read the status from the request's result field (0 for a Read),
#    as a drifted layout would: the failing Read then looks like success, so
#    the PRP attach fails with EOPNOTSUPP and a kernel log line saying why;
#    the block-layer engine, which does not read it, still attaches and loads,
#    and so does an attach without a flag: the block-layer engine alone
#    (kvblk_attach.engines without the PRP engine's bit).
# 3. Values the hook refuses (odd, out of range) give EINVAL; -1 restores
#    the mirror and the PRP attach works again.
. "$(dirname "$0")/lib.sh"

hold=tests/kmod-smoke/kmod_hold
[ -x "$hold" ] || skip "$hold not built"
dev=$KVBLK_TEST_DEVICE
param=/sys/module/kvblk/parameters/test_status_offset

expect_eq "test_status_offset default" "$(cat $param)" -1

$hold -e prp "$dev" 0:64K 1M:128K 8M+4K:4K || fail "PRP attach and load with the real mirror"
dmesg | grep -q "self-check failed" && fail "self-check failed with the real mirror"
ok "self-check passed on $(uname -r): PRP context attached, batch exact"
out=$($hold "$dev" 0:64K) || fail "default attach and load with the real mirror"
echo "$out" | grep -q "engine 2 engines 0x6 " ||
	fail "default attach: want engine 2 (bio) with engines 0x6 (bio, prp): $out"
ok "default attach: block-layer engine, PRP engine available for memory without struct pages"

echo 8 >$param || fail "write 8 to $param"
$hold -e prp -A EOPNOTSUPP "$dev" || fail "PRP attach with a drifted status offset"
dmesg | grep -q "PRP engine self-check failed: a Read past the namespace's end did not read as LBA Out of Range" ||
	fail "no kernel log line naming the self-check's reason"
ok "drifted status offset: PRP attach refused, kernel log says why"
# A default attach of an nvme-pci namespace still succeeds: block layer alone.
out=$($hold "$dev" 0:64K 1M:128K) || fail "default attach with a drifted status offset"
echo "$out" | grep -q "engine 2 engines 0x4 " ||
	fail "default attach with the hook: want engine 2 (bio) with engines 0x4 (bio only): $out"
ok "default attach with the hook: block-layer engine alone, batch exact"
$hold -e bio "$dev" 0:64K 1M:128K || fail "bio engine with the hook set"
ok "block-layer engine unaffected by the hook"

for bad in 3 32 -2 x; do
	if echo "$bad" >$param 2>/dev/null; then fail "$param accepted $bad"; fi
done
expect_eq "test_status_offset after refused writes" "$(cat $param)" 8
echo -1 >$param || fail "write -1 to $param"
$hold -e prp "$dev" 0:64K 1M:128K || fail "PRP attach after restoring the mirror"
ok "hook refuses 3, 32, -2, x; -1 restores the PRP engine"

# 4. The failing Read runs once per disk, not per attach (review-2 N8): each one
#    leaves an entry in the controller's Error Information Log, and any member
#    of the kvblk group may attach as often as it likes. The attach above
#    checked this disk again (the hook's write forgets the verdicts), so ten
#    more default attaches and ten PRP attaches complete no NVMe command with a
#    non-zero status: counted from the nvme driver's own tracepoint.
T=/sys/kernel/tracing
ev=$T/events/nvme/nvme_complete_rq
[ -d "$ev" ] || skip "no nvme_complete_rq tracepoint (tracefs at $T)"
echo 0 >$T/tracing_on
echo >$T/trace
echo 1 >"$ev/enable"
echo 1 >$T/tracing_on
for i in 1 2 3 4 5 6 7 8 9 10; do
	$hold "$dev" >/dev/null || fail "default attach $i"
	$hold -e prp "$dev" >/dev/null || fail "PRP attach $i"
done
echo 0 >$T/tracing_on
echo 0 >"$ev/enable"
cat $T/trace >"$KVBLK_VM_CASE_DIR/nvme-trace.txt"
done_cmds=$(grep -c 'nvme_complete_rq' "$KVBLK_VM_CASE_DIR/nvme-trace.txt" || true)
failed=$(grep 'nvme_complete_rq' "$KVBLK_VM_CASE_DIR/nvme-trace.txt" | grep -Ec 'status=0x0*[1-9a-f]' || true)
[ "$done_cmds" -ge 20 ] || fail "only $done_cmds NVMe completions traced for 20 attaches"
expect_eq "NVMe commands failed during 20 attaches of a checked disk ($done_cmds completed)" "$failed" 0
