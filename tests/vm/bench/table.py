#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Print the VM bench table from the files guest-bench.sh left in DIR.

kvblk-bench.json (kmod, uring, uring_cmd loads and its fio io_uring ceiling) and
fio-io_uring-N.json / fio-io_uring_cmd-N.json (fio run by guest-bench.sh with identical
options) become one table with GB/s (medians of the repeats), CPU s/GB and the
ratios the issue asks for. Exit status 0 when every leg produced a number and every
kvblk-bench object verified, else 1.
"""
import glob
import json
import os
import statistics
import sys


def fio_point(path):
    """(GB/s, CPU s/GB, p50 us) of one fio JSON output, or None."""
    try:
        with open(path) as f:
            text = f.read()
        j = json.loads(text[text.index('{'):])
        job = j['jobs'][0]
        rd = job['read']
        if job.get('error') or not rd.get('io_bytes'):
            return None
        runtime_s = rd['runtime'] / 1e3
        cpu_s = (job['usr_cpu'] + job['sys_cpu']) / 100.0 * runtime_s
        p50 = rd.get('clat_ns', {}).get('percentile', {}).get('50.000000', 0) / 1e3
        return rd['bw_bytes'] / 1e9, cpu_s / (rd['io_bytes'] / 1e9), p50
    except (OSError, ValueError, KeyError, IndexError):
        return None


def median_point(points):
    """The point with the median GB/s (the lower middle one for an even count)."""
    points = sorted((p for p in points if p), key=lambda p: p[0])
    return points[(len(points) - 1) // 2] if points else None


def main():
    d = sys.argv[1]
    rows = []  # (name, gbps, cpu_s_per_gb, note)
    ok = True
    bench = None
    try:
        with open(os.path.join(d, 'kvblk-bench.json')) as f:
            bench = json.load(f)
    except (OSError, ValueError) as e:
        print(f'kvblk-bench.json: {e}')
        ok = False
    cfg = {}
    if bench:
        cfg = bench.get('config', {})
        for r in bench.get('results', []):
            name = f"libkvblk {r['backend']}"
            if r.get('error') or not r.get('verified'):
                ok = False
            reps = ' '.join(f'{g:.3f}' for g in r.get('gbps_repeats', []))
            rows.append((name, r.get('gbps'), r.get('cpu_s_per_gb'),
                         f"W={r.get('workers')} QD={r.get('queue_depth')} p50 batch "
                         f"{r.get('p50_ms', 0):.2f} ms; runs {reps}; "
                         f"{'verified' if r.get('verified') else 'NOT VERIFIED'}"))
        for p in bench.get('fio', []):
            if p.get('ok'):
                reps = ' '.join(f'{g:.3f}' for g in p.get('gbps_repeats', []))
                rows.append(('fio io_uring (kvblk-bench)', p['gbps'], p.get('cpu_s_per_gb'),
                             f"QD={p['queue_depth']} fixedbufs={int(p.get('fixedbufs', 0))} "
                             f"/dev/nvme0n1; runs {reps}"))
    fio = {}
    for eng in ('io_uring', 'io_uring_cmd'):
        pts = [fio_point(p) for p in sorted(glob.glob(os.path.join(d, f'fio-{eng}-*.json')))]
        m = median_point(pts)
        fio[eng] = m
        dev = '/dev/ng0n1 cmd_type=nvme' if eng == 'io_uring_cmd' else '/dev/nvme0n1 direct=1'
        reps = ' '.join(f'{p[0]:.3f}' for p in pts if p)
        if m:
            rows.append((f'fio {eng}', m[0], m[1], f'{dev} fixedbufs=1 p50 {m[2]:.0f} us; runs {reps}'))
        else:
            rows.append((f'fio {eng}', None, None, f'{dev}: failed (see fio-{eng}-*.json.err)'))
            ok = False

    print(f"VM bench: {cfg.get('cmd_bytes', '?')}-byte commands, "
          f"{cfg.get('batch_objects', '?')} objects per load_many, one namespace "
          f"(QEMU TCG: absolute numbers are meaningless, ratios within this run are the point)")
    print(f"{'leg':<28} {'GB/s':>8} {'CPU s/GB':>9}  notes")
    print('=' * 100)
    for name, g, c, note in rows:
        gs = f'{g:8.3f}' if g is not None else '       -'
        cs = f'{c:9.2f}' if c is not None else '        -'
        print(f'{name:<28} {gs} {cs}  {note}')
    print('=' * 100)

    by = {name: g for name, g, _, _ in rows}

    def ratio(a, b):
        x, y = by.get(a), by.get(b)
        if x is None or y is None or not y:
            return '-'
        return f'{x / y:.2f}'

    print('Ratios (GB/s):')
    pairs = [('libkvblk kmod', 'fio io_uring_cmd'), ('libkvblk kmod', 'fio io_uring'),
             ('libkvblk kmod', 'fio io_uring (kvblk-bench)'), ('libkvblk kmod', 'libkvblk uring'),
             ('libkvblk kmod', 'libkvblk uring_cmd'), ('libkvblk uring_cmd', 'fio io_uring_cmd'),
             ('libkvblk uring', 'fio io_uring'), ('fio io_uring_cmd', 'fio io_uring')]
    for a, b in pairs:
        print(f'  {a + " / " + b:<58} {ratio(a, b)}')
    k, c, u = by.get('libkvblk kmod'), by.get('fio io_uring_cmd'), by.get('fio io_uring')
    if k is not None and c is not None and u is not None:
        print(f"Goal (issue 3): kmod >= fio io_uring_cmd: {'yes' if k >= c else 'NO'}; "
              f"kmod > fio io_uring: {'yes' if k > u else 'NO'}")
    profile(d)
    return 0 if ok else 1


def counters(path):
    """(busy guest CPU s, context switches, NVMe interrupts) written by guest-bench.sh, or None."""
    try:
        with open(path) as f:
            ticks, ctxt, irqs = (int(x) for x in f.read().split())
        return ticks / 100.0, ctxt, irqs
    except (OSError, ValueError):
        return None


def profile(d):
    """The load path alone (loadloop.py, fio time_based): median GB/s, busy guest CPU per GB."""
    lines = []
    for b in ('kmod', 'uring', 'uring_cmd', 'fio io_uring_cmd'):
        pts = []
        for path in sorted(glob.glob(os.path.join(d, f'loadloop-{b.replace(" ", "-")}-*'))):
            r = path.rsplit('-', 1)[1].split('.')[0]
            try:
                if b.startswith('fio'):
                    p = fio_point(path)
                    with open(path) as f:
                        text = f.read()
                    nbytes = json.loads(text[text.index('{'):])['jobs'][0]['read']['io_bytes']
                    gbps = p[0]
                else:
                    with open(path) as f:
                        text = f.read().split()
                    gbps, nbytes = float(text[1]), int(text[3].lstrip('(')) * 1048576
            except (OSError, ValueError, KeyError, IndexError, TypeError):
                continue
            c = counters(os.path.join(d, f'busy-{b.replace(" ", "-")}-{r}.txt'))
            mib = nbytes / 1048576
            pts.append((gbps, *((c[0] / (nbytes / 1e9), c[1] / mib, c[2] / mib) if c else (None,) * 3)))
        if not pts:
            continue
        m = median_point(pts)
        cols = ' '.join(f'{v:9.2f}' if v is not None else '        -' for v in m[1:])
        name = b if b.startswith('fio') else 'libkvblk ' + b
        runs = ' '.join(f'{p[0]:.3f}' for p in pts)
        lines.append(f'  {name:<26} {m[0]:8.3f} {cols}  runs {runs}')
    if lines:
        print('Load path alone, 3 s per run, legs alternating (loadloop.py; fio time_based), no '
              'verification; whole guest (2 vCPUs): busy CPU (user+system+irq) per GB, context '
              'switches and NVMe interrupts per MiB:')
        print(f'  {"leg":<26} {"GB/s":>8} {"CPU s/GB":>9} {"ctxsw/MiB":>9} {"irq/MiB":>9}')
        print('\n'.join(lines))


if __name__ == '__main__':
    sys.exit(main())
