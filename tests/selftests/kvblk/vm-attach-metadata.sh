#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# VM case (tests/vm/cases.list, variant "meta"): KVBLK_IOC_ATTACH with
# KVBLK_ATTACH_F_ENGINE_PRP of a namespace whose LBA format carries metadata
# ($KVBLK_TEST_MD_DEVICE, default /dev/nvme0n1 formatted ms=8,mset=0,pi=0)
# fails with EOPNOTSUPP and logs the reason; without a flag the attach
# succeeds with the block-layer engine alone (kvblk_attach.engines without
# the PRP engine: the block layer handles the metadata); the module unloads
# afterwards (the runner unloads it: load:kvblk). The same check as kvblk_test's
# attach_metadata_format_eopnotsupp, which cannot run alone here: the
# kselftest harness of the 6.1 headers has no test filter, and every other
# test of that program needs a metadata-free namespace, which this VM lacks.
. "$(dirname "$0")/../../vm/cases/lib.sh"
set +e

md=${KVBLK_TEST_MD_DEVICE:-/dev/nvme0n1}
[ -b "$md" ] || skip "$md is not a block device"
PYTHONPATH=$KVBLK_SRC/tests/vm /usr/bin/python3 - "$md" <<'PY'
import errno, os, sys
import kvblk_uapi as u

try:
    ctx = u.Context(sys.argv[1])
except OSError as e:
    print("FAIL: default attach %s: %s, want the block-layer engine"
          % (sys.argv[1], os.strerror(e.errno)))
    sys.exit(1)
a = ctx.attach
if a["engine"] != u.ENGINE_BIO or a["engines"] != 1 << u.ENGINE_BIO:
    print("FAIL: default attach %s: engine %d engines %#x, want %d and %#x (no PRP)"
          % (sys.argv[1], a["engine"], a["engines"], u.ENGINE_BIO, 1 << u.ENGINE_BIO))
    sys.exit(1)
os.close(ctx.fd)
print("ok: default attach %s: block-layer engine alone" % sys.argv[1])
try:
    ctx = u.Context(sys.argv[1], u.ATTACH_F_ENGINE_PRP)
except OSError as e:
    if e.errno == errno.EOPNOTSUPP:
        print("ok: attach %s with KVBLK_ATTACH_F_ENGINE_PRP: EOPNOTSUPP" % sys.argv[1])
        sys.exit(0)
    print("FAIL: PRP attach %s: %s, want EOPNOTSUPP" % (sys.argv[1], os.strerror(e.errno)))
    sys.exit(1)
print("FAIL: PRP attach %s succeeded (lba_size %d), want EOPNOTSUPP"
      % (sys.argv[1], ctx.attach["lba_size"]))
sys.exit(1)
PY
rc=$?

if [ $rc = 0 ]; then
	if dmesg | grep -q "kvblk: attach ${md##*/}: LBA format with metadata"; then
		ok "kernel log names the reason"
	else
		echo "FAIL: no 'LBA format with metadata' line in the kernel log" >&2
		dmesg | grep kvblk >&2
		rc=1
	fi
fi
exit $rc
