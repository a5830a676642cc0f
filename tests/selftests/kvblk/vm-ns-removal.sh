#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# VM case (tests/vm/cases.list): controller reset, then PCI removal of the
# NVMe controller, while contexts are attached and batches are in flight.
#
#  - Context P (PRP engine) and context B (block-layer engine) on
#    $KVBLK_TEST_DEVICE, each with a registered 4 MiB host buffer, each
#    loaded by a thread in a loop: 64 objects of 64 KiB, the destination
#    filled with 0xee before every batch, every object that reports 0
#    compared with the bytes pread(O_DIRECT) read before.
#  - reset_controller during the loads: each object exact, or -EIO/-ENOLINK.
#  - sysfs remove of the PCI function during the loads: each object exact
#    or -ENOLINK (never another status, never success without the bytes;
#    -EIO only when the nvme driver timed out a command the emulated
#    controller lost in that window, printed as a note).
#    After it: P's loads fail as a whole with -ENODEV, a registration on P
#    with -ENODEV, unregister works; B's objects fail with -ENOLINK.
#  - Before the removal, P also registers dma-bufs of exporters that are not
#    dynamic: the test exporter's KVBLK_TEST_DMABUF_F_STATIC buffer and,
#    where the kernel has udmabuf (6.12, 7.2), a udmabuf. After the removal,
#    before anything is closed, the test exporter counts no attachment and no
#    mapping of kvblk's any more: kvblk detached while the function existed
#    (review-2 N1: 6.1 and 6.12 keep a non-dynamic exporter's mapping until
#    detach, and a detach after device_del() is review H1's NULL dereference
#    behind an IOMMU).
#  - A process (tests/selftests/kvblk/kvblk_stall) holds a PRP batch whose
#    commands completed but which it never collects (io_uring with
#    IORING_SETUP_DEFER_TASKRUN, then SIGSTOP): the removal must not wait for
#    it (review-2 N3; it used to wait for the batch's release, for ever).
#    Continued, its CQE comes (objects exact or ENODEV) and its next batch
#    fails with ENODEV.
#  - Close, rescan, rmmod: no WARNING/BUG/Oops in the kernel log, pinned
#    pages (nr_foll_pin_acquired - nr_foll_pin_released) back to baseline.
# Removes the controller: run it last in its VM (the namespace may come back
# under another name).
#
# On 6.1 behind a translating IOMMU the case unbinds the nvme driver instead
# of removing the function (the same driver removal and bus notification for
# kvblk): 6.1's nvme-pci frees its doorbell buffer at the controller's last
# reference, which the last close of a namespace drops, and after device_del()
# that free faults in __free_pages() whoever held the namespace open
# (kmod/README.md, "Known limits"); 6.12 and 7.2 free it in nvme_remove().
. "$(dirname "$0")/../../vm/cases/lib.sh"
set +e

dev=${KVBLK_TEST_DEVICE:-/dev/nvme0n1}
[ -b "$dev" ] || skip "$dev is not a block device"
[ -f "${KVBLK_KO:-}" ] || skip "kvblk.ko not built (make -C kmod)"
pci=$(readlink -f "/sys/class/block/${dev##*/}/device/device")
[ -e "$pci/remove" ] || skip "no PCI function found for $dev ($pci)"
ctrl=$(readlink -f "/sys/class/block/${dev##*/}/device")
[ -e "$ctrl/reset_controller" ] || skip "no reset_controller for $dev ($ctrl)"

mode=remove
if [[ $(uname -r) == 6.1.* ]] && [[ $(cat "$pci/iommu_group/type" 2>/dev/null) == DMA* ]]; then
	mode=unbind
	echo "note: 6.1 with an IOMMU: unbinding nvme instead of removing the function (see the header)"
fi

pins() {
	echo 1 >/proc/sys/vm/stat_refresh 2>/dev/null
	awk '/^nr_foll_pin_acquired /{a=$2} /^nr_foll_pin_released /{r=$2} END{print a-r}' /proc/vmstat
}
log0=$(dmesg | wc -l)
pins0=$(pins)
# The emulated controller can lose a command submitted around its reset; the
# nvme driver then recovers (timeout, abort, timeout again, reset) in two
# I/O timeouts: 10 s each here instead of 30, so that the loads' 90 s bound
# below is about kvblk, not the driver's patience. Block-layer requests take
# the queue's timeout, passthrough ones (the PRP engine's) nvme_core's
# io_timeout (nvme_init_request()).
tmo=/sys/block/${dev##*/}/queue/io_timeout
tmo0=$(cat "$tmo" 2>/dev/null)
[ -z "$tmo0" ] || echo 10000 >"$tmo" || fail "cannot set $tmo"
core_tmo=/sys/module/nvme_core/parameters/io_timeout
core_tmo0=$(cat "$core_tmo" 2>/dev/null)
[ -z "$core_tmo0" ] || echo 10 >"$core_tmo" || fail "cannot set $core_tmo"
insmod "$KVBLK_KO" || fail "insmod $KVBLK_KO"

stall=$KVBLK_SRC/build-selftests/kvblk/kvblk_stall
[ -x "$stall" ] || skip "$stall not built"
PYTHONPATH=$KVBLK_SRC/tests/vm timeout -s KILL 240 /usr/bin/python3 -u - "$dev" "$pci" "$ctrl" "$mode" "$stall" <<'PY'
import errno, fcntl, mmap, os, signal, struct, subprocess, sys, threading, time
import kvblk_uapi as u

dev, pci, ctrl, mode, stall = sys.argv[1:6]
NR, OBJ = 64, 64 << 10
SPAN = NR * OBJ                 # 4 MiB
bad = []

# What the loads must return: the first 4 MiB, read with O_DIRECT.
want = mmap.mmap(-1, SPAN)
fd = os.open(dev, os.O_RDONLY | os.O_DIRECT)
assert os.preadv(fd, [want], 0) == SPAN
os.close(fd)

class Ctx(u.Context):
    def __init__(self, name, flags):
        super().__init__(dev, flags)
        self.name = name
        self.m = mmap.mmap(-1, SPAN)
        self.buf_id = self.register(u.buffer_address(self.m), SPAN)
        # Object i reads device bytes [i*OBJ, +OBJ) into the same place of the buffer.
        self.batch = u.Batch([(i * OBJ, OBJ, i * OBJ, self.buf_id) for i in range(NR)])
        self.batches = 0
        self.seen = {}

    def load(self):
        """One batch: (call errno or 0, statuses); every 0 object checked."""
        self.m[:] = b"\xee" * SPAN
        try:
            ret, st, _ = self.batch.load(self)
        except OSError as e:
            return e.errno, None
        if ret != st.count(0):
            bad.append("%s: ret %d but %d objects 0" % (self.name, ret, st.count(0)))
        for i, s in enumerate(st):
            self.seen[s] = self.seen.get(s, 0) + 1
            if s == 0 and self.m[i * OBJ:(i + 1) * OBJ] != want[i * OBJ:(i + 1) * OBJ]:
                bad.append("%s: object %d reported 0 but its bytes differ" % (self.name, i))
        self.batches += 1
        return 0, st

P = Ctx("prp", u.ATTACH_F_ENGINE_PRP)
B = Ctx("bio", u.ATTACH_F_ENGINE_BIO)
for c in (P, B):
    err, st = c.load()
    if err or st != [0] * NR:
        print("FAIL: %s: before anything: errno %s statuses %s" % (c.name, err, st))
        sys.exit(1)
print("ok: both contexts read %d objects exactly" % NR)

phase = {"allowed": {0}}
stop = threading.Event()

def loop(c):
    while not stop.is_set():
        err, st = c.load()
        if err:
            c.last_err = err
            if err != errno.ENODEV or c is not P:
                bad.append("%s: the call failed with errno %d" % (c.name, err))
            return
        for s in set(st) - phase["allowed"]:
            bad.append("%s: status %d (allowed %s)" % (c.name, s, sorted(phase["allowed"])))

def run_with(action, allowed, settle):
    phase["allowed"] = allowed
    stop.clear()
    ths = [threading.Thread(target=loop, args=(c,)) for c in (P, B)]
    n0 = [c.batches for c in (P, B)]
    for t in ths:
        t.start()
    while any(c.batches < n + 2 for c, n in zip((P, B), n0)) and all(t.is_alive() for t in ths):
        time.sleep(0.05)
    action()
    time.sleep(settle)
    stop.set()
    for t in ths:
        t.join(90)
        if t.is_alive():
            print("FAIL: a load did not return within 90 s")
            os._exit(1)

# The stalled batch starts before the reset below, on a controller that lost
# nothing yet: after a reset the emulated controller can lose commands. Twice
# on 6.1 with an IOMMU, started after the reset, the batch's counter stopped
# at 15 of 16: the lost command was the PRP engine's one-LBA format check
# before the first command (kvblk_prp_recheck(), not a counted command), so
# object 0 failed -EIO without a command; kvblk_stall now tells that apart
# from a hang (its header). The removal below still finds it uncollected.
#
# A command that the emulated controller lost around the reset below times
# out (the nvme driver logs "timeout"), and the driver fails it, and those
# queued behind its reset, with -EIO: that is the controller's loss, not the
# removal. So -EIO is allowed during the removal only when the driver logged
# a command timeout in that window, and the allowance is printed; so are the
# stalled batch's objects (kvblk_stall's header).
def timeouts():
    with open("/dev/kmsg", "rb", buffering=0) as k:
        os.set_blocking(k.fileno(), False)
        n = 0
        while True:
            try:
                rec = k.read(8192)
            except BlockingIOError:
                return n
            except OSError:         # a record overwritten while reading: go on
                continue
            if not rec:
                return n
            n += b" timeout, " in rec and b"nvme" in rec

# A batch whose commands completed and which its process does not collect (review-2 N3).
t_stall = timeouts()
child = subprocess.Popen([stall, dev], stdout=subprocess.PIPE, text=True)
line = child.stdout.readline()
if not line.startswith("STALLED"):
    print("FAIL: kvblk_stall: %r" % line)
    child.kill()
    sys.exit(1)
lost_stall = timeouts() - t_stall
print("ok: kvblk_stall: %s (nvme command timeouts meanwhile: %d)" % (line.strip(), lost_stall))

def reset():
    with open(os.path.join(ctrl, "reset_controller"), "w") as f:
        f.write("1")
    print("ok: reset %s" % ctrl)

run_with(reset, {0, -errno.EIO, -errno.ENOLINK}, 2)
# Let the controller come back, then a batch on each context is exact again.
for c in (P, B):
    for _ in range(100):
        err, st = c.load()
        if not err and st == [0] * NR:
            break
        time.sleep(0.1)
    else:
        print("FAIL: %s: no exact batch after the reset: errno %s statuses %s" % (c.name, err, st))
        sys.exit(1)
print("ok: after the reset both contexts read exactly (statuses seen: prp %s, bio %s)" % (P.seen, B.seen))
if bad:
    print("FAIL: during the reset:\n  " + "\n  ".join(bad[:20]))
    sys.exit(1)

# Non-dynamic dma-buf exporters registered on P (review-2 N1). The test
# exporter's interface: tests/kmod-exporters/kvblk_test_dmabuf.h.
TDB_CREATE = (3 << 30) | (16 << 16) | (0xBB << 8) | 0x01
TDB_COUNTS = (2 << 30) | (40 << 16) | (0xBB << 8) | 0x05
TDB_F_STATIC = 1 << 1
tdb = os.open("/dev/kvblk_test_dmabuf", os.O_RDWR)
def tdb_counts():
    c = bytearray(40)
    fcntl.ioctl(tdb, TDB_COUNTS, c, True)
    return dict(zip(("buffers", "attachments", "mappings", "pins", "revokes"),
                    struct.unpack("5q", c)))
c = bytearray(struct.pack("QiI", 1 << 20, 0, TDB_F_STATIC))
fcntl.ioctl(tdb, TDB_CREATE, c, True)
static_fd = struct.unpack("QiI", c)[1]
dmabufs = [("test exporter, static", static_fd)]
if os.path.exists("/dev/udmabuf"):
    # struct udmabuf_create {u32 memfd; u32 flags; u64 offset; u64 size}: _IOW('u', 0x42, 24)
    memfd = os.memfd_create("kvblk-udmabuf", os.MFD_ALLOW_SEALING)
    os.ftruncate(memfd, 4 << 20)
    fcntl.fcntl(memfd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK)
    udev = os.open("/dev/udmabuf", os.O_RDWR)
    # A mutable argument: fcntl.ioctl() then returns the ioctl's value, the dma-buf fd.
    arg = bytearray(struct.pack("IIQQ", memfd, 1, 0, 4 << 20))
    dmabufs.append(("udmabuf", fcntl.ioctl(udev, (1 << 30) | (24 << 16) | (ord("u") << 8) | 0x42,
                                           arg, True)))
    os.close(udev)
    os.close(memfd)
else:
    print("note: no /dev/udmabuf (CONFIG_UDMABUF: 6.12 and 7.2 have it): the test exporter's static buffer only")
dmabuf_ids = []
for name, fd in dmabufs:
    bid = P.register(0, 1 << 20, kind=u.MEM_DMABUF, dmabuf_fd=fd)
    dmabuf_ids.append(bid)
    ret, st, _ = u.Batch([(0, 64 << 10, 0, bid)]).load(P)
    if st != [0]:
        print("FAIL: a load into the %s dma-buf: %d %s" % (name, ret, st))
        sys.exit(1)
    print("ok: %s dma-buf registered on the PRP context (buffer %d), a load into it ok" % (name, bid))
n0 = tdb_counts()
if n0["attachments"] != 1 or n0["mappings"] != 1:
    print("FAIL: before the removal the test exporter counts %s, want 1 attachment and 1 mapping" % n0)
    sys.exit(1)


P.seen, B.seen = {}, {}
removal_s = []
def remove():
    t0 = time.monotonic()
    try:
        do_remove()
    finally:
        removal_s.append(time.monotonic() - t0)

def do_remove():
    if mode == "unbind":
        with open("/sys/bus/pci/drivers/nvme/unbind", "w") as f:
            f.write(os.path.basename(pci))
        print("ok: unbound nvme from %s" % pci)
        return
    with open(os.path.join(pci, "remove"), "w") as f:
        f.write("1")
    print("ok: removed %s" % pci)

t0 = timeouts()
run_with(remove, {0, -errno.ENOLINK, -errno.EIO}, 1)
lost = timeouts() - t0
eio = P.seen.get(-errno.EIO, 0) + B.seen.get(-errno.EIO, 0)
if eio and not lost:
    bad.append("-EIO for %d objects during the removal, and no command timed out" % eio)
if bad:
    print("FAIL: during the removal:\n  " + "\n  ".join(bad[:20]))
    sys.exit(1)
if eio:
    print("note: %d objects -EIO during the removal: the nvme driver timed out %d commands "
          "the emulated controller lost (dmesg), and failed them" % (eio, lost))
print("ok: during the removal every object exact, -ENOLINK, or -EIO after a driver timeout "
      "(prp %s, bio %s)" % (P.seen, B.seen))
print("ok: the removal took %.1f s with a batch left uncollected" % removal_s[0])
if removal_s[0] > 60:
    print("FAIL: the removal took %.1f s" % removal_s[0])
    sys.exit(1)

n1 = tdb_counts()
if n1["attachments"] or n1["mappings"]:
    print("FAIL: after the removal the test exporter still counts %s: kvblk kept a mapping "
          "or an attachment for the removed function" % n1)
    sys.exit(1)
print("ok: after the removal, before any close: the test exporter counts no attachment "
      "and no mapping (%s)" % n1)
os.kill(child.pid, signal.SIGCONT)
try:
    out, _ = child.communicate(timeout=60)
except subprocess.TimeoutExpired:
    child.kill()
    print("FAIL: kvblk_stall did not finish after SIGCONT")
    sys.exit(1)
print("kvblk_stall: " + out.strip().replace("\n", "; "))
if child.returncode != 0:
    print("FAIL: kvblk_stall exited with %d" % child.returncode)
    sys.exit(1)
stall_eio = [int(l.split()[1]) for l in out.splitlines() if l.startswith("EIO ")]
if stall_eio != [0] and not (stall_eio and lost_stall):
    print("FAIL: the stalled batch: -EIO objects %s, and %d nvme command timeouts while it ran"
          % (stall_eio or "not reported", lost_stall))
    sys.exit(1)
print("ok: the stalled batch's CQE came after the removal, its next batch ENODEV")

err, st = P.load()
if err != errno.ENODEV:
    print("FAIL: prp after removal: errno %s statuses %s, want ENODEV" % (err, st))
    sys.exit(1)
print("ok: prp context: LOAD_MANY fails with ENODEV")
m2 = mmap.mmap(-1, 1 << 20)
try:
    P.register(u.buffer_address(m2), 1 << 20)
    print("FAIL: prp context: registration after removal succeeded")
    sys.exit(1)
except OSError as e:
    if e.errno != errno.ENODEV:
        print("FAIL: prp context: registration after removal: errno %d, want ENODEV" % e.errno)
        sys.exit(1)
print("ok: prp context: REGISTER_BUFFER fails with ENODEV")
err, st = B.load()
if err or st != [-errno.ENOLINK] * NR:
    print("FAIL: bio after removal: errno %s statuses %s, want every object -ENOLINK" % (err, st))
    sys.exit(1)
print("ok: bio context: every object -ENOLINK")

for c in (P, B):
    c.unregister(c.buf_id)
for bid in dmabuf_ids:
    P.unregister(bid)
for c in (P, B):
    c.close()
for _, fd in dmabufs:
    os.close(fd)
n2 = tdb_counts()
if n2["buffers"] or n2["attachments"] or n2["mappings"]:
    print("FAIL: after close the test exporter counts %s" % n2)
    sys.exit(1)
os.close(tdb)
print("ok: buffers unregistered, contexts closed, the exporter's buffers gone")
sys.exit(0)
PY
rc=$?
[ $rc = 137 ] && echo "FAIL: the test did not finish within 240 s" >&2
[ $rc = 0 ] || echo "FAIL: the test exited with status $rc" >&2

if [ $mode = unbind ]; then
	# Bound again only if the test got as far as unbinding it.
	[ -e "$pci/driver" ] || echo "${pci##*/}" >/sys/bus/pci/drivers/nvme/bind
else
	echo 1 >/sys/bus/pci/rescan
fi
# The timeouts as they were (the namespace may be back under another name).
[ -z "$tmo0" ] || { echo "$tmo0" >"$tmo"; } 2>/dev/null || true
[ -z "$core_tmo0" ] || echo "$core_tmo0" >"$core_tmo"
if ! rmmod kvblk; then
	echo "FAIL: rmmod kvblk (a context leaked?)" >&2
	rc=1
fi
pins1=$(pins)
if [ "$pins1" != "$pins0" ]; then
	echo "FAIL: pinned pages $pins1, baseline $pins0" >&2
	rc=1
else
	ok "pinned pages back to baseline ($pins0)"
fi
# Reports of tests/vm/known-reports.list in their exact shape are allowed, as
# the rig's own scan allows them (6.1's nvme-pci lockdep report when a lost
# command's timeout meets the reset: the header of that list).
if dmesg | tail -n +"$((log0 + 1))" |
	awk -F'\t' -v krel="$(uname -r)" -f "$KVBLK_SRC/tests/vm/known-filter.awk" \
		"$KVBLK_SRC/tests/vm/known-reports.list" - |
	grep -E "WARNING|BUG|Oops|Call Trace|general protection|DMAR:.*fault"; then
	echo "FAIL: the kernel log above" >&2
	rc=1
else
	ok "no warning in the kernel log"
fi
dmesg | tail -n +"$((log0 + 1))" | grep -E "kvblk" | tail -n 8
# On a failure the nvme driver's own account too (timeouts, aborts, resets).
[ $rc = 0 ] || dmesg | tail -n +"$((log0 + 1))" | grep -E "nvme" | tail -n 16
exit $rc
