#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Load the first BYTES of DEVICE over and over with one libkvblk backend, nothing else.

usage: loadloop.py LIBKVBLK.so DEVICE BACKEND BYTES OBJECT_BYTES BATCH QD CMD SECONDS [WORKERS [CHECK [MODE]]]

A profiling driver for guest-bench.sh and guest-cpu-bench.sh: unlike kvblk-bench it
neither writes nor verifies, so `perf record` around it sees the load path only. One
registered buffer of BATCH * OBJECT_BYTES; after one warm-up call, calls of BATCH objects
back to back for SECONDS. The descriptor arrays of every batch are built before the first
call, so that the loop costs one ctypes call per batch. WORKERS (0: the library's default)
sets kvblk_open_opts.workers (threadpool threads, uring rings). CHECK=1: the warm-up call's
objects are compared with os.pread of the device first (exit 1 when one differs). MODE
"sync" (default): one blocking kvblk_load_many() per batch. "pipe:K": an engine's layer
pipeline: K batches (layers) outstanding through kvblk_submit(), each into its own part of the
buffer (K x BATCH x OBJECT_BYTES), the thread polls kvblk_event_fd() (non-blocking: poll(2),
as an engine's event loop does), takes what completed with kvblk_reap() and submits as many
layers again. Prints GB/s.
"""
import ctypes as C
import mmap
import os
import select
import sys
import time


class OpenOpts(C.Structure):
    _fields_ = [('opts_size', C.c_size_t), ('backend', C.c_uint32), ('queue_depth', C.c_uint32),
                ('workers', C.c_uint32), ('flags', C.c_uint32), ('max_cmd_bytes', C.c_uint64),
                ('max_descs', C.c_uint32), ('eagain_retries', C.c_uint32), ('create_bytes', C.c_uint64)]


# struct kvblk_desc of 0.3 (48 bytes): ctypes binds kvblk_load_many@@KVBLK_0.3, the default
# version, which reads this layout (the 40-byte one is only for binaries linked against 0.2).
class Desc(C.Structure):
    _fields_ = [('offset', C.c_uint64), ('length', C.c_uint64), ('addr', C.c_uint64),
                ('buf_id', C.c_uint32), ('flags', C.c_uint32), ('tag', C.c_uint64),
                ('target', C.c_uint32), ('reserved', C.c_uint32)]


class Result(C.Structure):
    _fields_ = [('status', C.c_int32), ('reserved', C.c_uint32), ('bytes', C.c_uint64), ('tag', C.c_uint64)]


class SubmitOpts(C.Structure):
    _fields_ = [('opts_size', C.c_size_t), ('flags', C.c_uint32), ('bad_index', C.c_int32),
                ('user_data', C.c_uint64), ('results', C.c_void_p)]


class Cqe(C.Structure):
    _fields_ = [('ticket', C.c_uint64), ('user_data', C.c_uint64), ('status', C.c_int32), ('flags', C.c_uint32),
                ('failed', C.c_uint32), ('index', C.c_uint32), ('bytes', C.c_uint64), ('tag', C.c_uint64),
                ('path', C.c_uint32), ('backend', C.c_uint32), ('elapsed_ns', C.c_uint64)]


KVBLK_CQE_BATCH = 1


def pipeline(lib, handle, batches, batch, obj, layers, secs):
    """Bytes loaded in SECS with LAYERS batches outstanding (after one warm-up round)."""
    efd = lib.kvblk_event_fd(handle)
    if efd < 0:
        sys.exit(f'kvblk_event_fd: {efd}')
    opts = SubmitOpts()
    lib.kvblk_submit_opts_init(C.byref(opts), C.c_size_t(C.sizeof(opts)))
    cqes = (Cqe * layers)()
    poller = select.poll()
    poller.register(efd, select.POLLIN)
    ticket = C.c_uint64()
    nxt = 0

    def submit(slot):
        nonlocal nxt
        opts.user_data = slot
        rc = lib.kvblk_submit(handle, batches[slot][nxt % len(batches[slot])], batch, C.byref(opts),
                              C.byref(ticket))
        if rc:
            sys.exit(f'kvblk_submit: {rc}: {lib.kvblk_last_error().decode()}')
        nxt += 1

    for slot in range(layers):
        submit(slot)
    done, t0 = 0, None
    while t0 is None or time.monotonic() - t0 < secs:
        poller.poll()  # readable while completions wait; kvblk_reap() clears it
        n = lib.kvblk_reap(handle, cqes, layers, 0, C.c_int64(0))
        if n < 0:
            sys.exit(f'kvblk_reap: {n}')
        for i in range(n):
            c = cqes[i]
            if not c.flags & KVBLK_CQE_BATCH:
                continue
            if c.status or c.failed:
                sys.exit(f'batch {c.ticket}: status {c.status}, {c.failed} objects failed')
            if t0 is None:  # the first completion ends the warm-up
                t0 = time.monotonic()
            else:
                done += batch * obj
            submit(int(c.user_data))
    dt = time.monotonic() - t0
    return done, dt


def main():
    lib_path, dev, backend, total, obj, batch, qd, cmd, secs = sys.argv[1:10]
    total, obj, batch, qd, cmd, secs = int(total), int(obj), int(batch), int(qd), int(cmd), float(secs)
    workers = int(sys.argv[10]) if len(sys.argv) > 10 else 0
    check = len(sys.argv) > 11 and sys.argv[11] == '1'
    mode = sys.argv[12] if len(sys.argv) > 12 else 'sync'
    layers = int(mode.split(':')[1]) if mode.startswith('pipe:') else 0
    if mode != 'sync' and layers < 1:
        sys.exit(f'MODE {mode}: want sync or pipe:K, K >= 1')
    lib = C.CDLL(lib_path)
    lib.kvblk_last_error.restype = C.c_char_p
    b = lib.kvblk_backend_from_name(backend.encode())
    opts = OpenOpts()
    lib.kvblk_open_opts_init(C.byref(opts), C.c_size_t(C.sizeof(opts)))
    opts.backend, opts.queue_depth, opts.max_cmd_bytes = b, qd, cmd
    if workers:
        opts.workers = workers
    handle = C.c_void_p()
    rc = lib.kvblk_open(dev.encode(), C.byref(opts), C.byref(handle))
    if rc:
        sys.exit(f'kvblk_open: {rc}: {lib.kvblk_last_error().decode()}')
    # Private anonymous memory (as an application's buffers; shared memory would make the
    # per-command page pinning of the backends without registration slower), touched first.
    slots = max(layers, 1)
    mem = mmap.mmap(-1, slots * batch * obj, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    addr = C.addressof(C.c_char.from_buffer(mem))
    C.memset(addr, 0, slots * batch * obj)
    buf = C.c_uint32()
    rc = lib.kvblk_register_buffer(handle, 0, C.c_void_p(addr), C.c_uint64(slots * batch * obj), C.byref(buf))
    if rc:
        sys.exit(f'kvblk_register_buffer: {rc}: {lib.kvblk_last_error().decode()}')
    res = (Result * batch)()
    objects = total // obj
    nbatches = max(1, objects // batch)
    # Per buffer slot (a layer in flight), every batch's descriptors into that slot.
    per_slot = []
    for slot in range(slots):
        batches = []
        for j in range(nbatches):
            descs = (Desc * batch)()
            for k in range(batch):
                descs[k] = Desc(((j * batch + k) % objects) * obj, obj, (slot * batch + k) * obj, buf.value, 0, k)
            batches.append(descs)
        per_slot.append(batches)
    batches = per_slot[0]
    if check:
        rc = lib.kvblk_load_many(handle, batches[0], batch, res, None)
        fd = os.open(dev, os.O_RDONLY)
        for k in range(batch):
            if rc != batch or os.pread(fd, obj, batches[0][k].offset) != mem[k * obj:(k + 1) * obj]:
                sys.exit(f'{backend}: object at {batches[0][k].offset} differs from pread (rc {rc})')
        os.close(fd)
    if layers:
        done, dt = pipeline(lib, handle, per_slot, batch, obj, layers, secs)
        print(f'{backend} pipe:{layers}: {done / dt / 1e9:.3f} GB/s ({done >> 20} MiB in {dt:.2f} s)')
        lib.kvblk_close(handle)
        return
    done = nxt = 0
    t0 = None
    while t0 is None or time.monotonic() - t0 < secs:
        descs = batches[nxt % nbatches]
        nxt += 1
        rc = lib.kvblk_load_many(handle, descs, batch, res, None)
        if rc != batch:
            sys.exit(f'kvblk_load_many: {rc}: {lib.kvblk_last_error().decode()}')
        if t0 is None:  # the first call warms up (page tables, kernel allocations)
            t0 = time.monotonic()
            continue
        done += batch * obj
    dt = time.monotonic() - t0
    print(f'{backend}: {done / dt / 1e9:.3f} GB/s ({done >> 20} MiB in {dt:.2f} s)')
    lib.kvblk_close(handle)


if __name__ == '__main__':
    main()
