#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Print the VM bench table from the files guest-bench.sh left in DIR.

kvblk-bench-R.json (kmod, uring, uring_cmd: one verified pass each in round R) and
fio-ENGINE-fbF-jJ-qdQ-R.json (the fio search: engine, fixedbufs, numjobs, iodepth, round)
become one table: GB/s, objects/s, p50/p99 latency and CPU seconds per GB of every leg,
each the leg's median round. For fio, per engine: the best point at the kvblk legs'
threads and queue depth ("equal threads"; fixedbufs either way) and the best point of
the whole search ("best"). Then the ratios the issue asks for: a kvblk figure above 1.05x
a fio best is printed as "ceiling not found", never as a ratio. Exit status 0 when every
leg produced a number and every kvblk load verified, else 1.
"""
import glob
import json
import os
import re
import statistics
import sys

CEILING_SLACK = 1.05


class Point:
    """One leg's figures in one run."""

    def __init__(self, gbps, objs_s=None, p50_ms=None, p99_ms=None, cpu=None, note=''):
        self.gbps, self.objs_s, self.p50_ms, self.p99_ms, self.cpu = gbps, objs_s, p50_ms, p99_ms, cpu
        self.note = note


def fio_point(path, object_bytes):
    """Point of one fio JSON output (group_reporting: one job entry), or None."""
    try:
        with open(path) as f:
            text = f.read()
        j = json.loads(text[text.index('{'):])
        jobs = j['jobs']
        rd_bytes = sum(job['read']['io_bytes'] for job in jobs)
        if any(job.get('error') for job in jobs) or not rd_bytes:
            return None
        job = jobs[0]
        rd = job['read']
        runtime_s = rd['runtime'] / 1e3
        # usr_cpu/sys_cpu: percent of the run, summed over the jobs by group_reporting.
        cpu_s = (job['usr_cpu'] + job['sys_cpu']) / 100.0 * runtime_s
        pct = rd.get('clat_ns', {}).get('percentile', {})
        gbps = rd['bw_bytes'] / 1e9
        return Point(gbps, rd['bw_bytes'] / object_bytes, pct.get('50.000000', 0) / 1e6,
                     pct.get('99.000000', 0) / 1e6, cpu_s / (rd_bytes / 1e9))
    except (OSError, ValueError, KeyError, IndexError, ZeroDivisionError):
        return None


def median_point(points):
    """The point with the median GB/s (the lower middle one for an even count)."""
    points = sorted((p for p in points if p), key=lambda p: p.gbps)
    return points[(len(points) - 1) // 2] if points else None


def runs(points):
    return ' '.join(f'{p.gbps:.3f}' for p in points if p)


def main():
    d = sys.argv[1]
    ok = True
    rows = []  # (name, threads, qd, Point or None, notes)
    cfg = {}
    object_bytes = 16 << 20

    # kvblk legs: one pass per round.
    legs = {}  # backend -> [(Point, result)]
    for path in sorted(glob.glob(os.path.join(d, 'kvblk-bench-*.json'))):
        try:
            with open(path) as f:
                bench = json.load(f)
        except (OSError, ValueError) as e:
            print(f'{os.path.basename(path)}: {e}')
            ok = False
            continue
        cfg = bench.get('config', cfg)
        for r in bench.get('results', []):
            if r.get('error') or not r.get('verified'):
                ok = False
            object_bytes = r.get('object_bytes') or object_bytes
            p = Point(r.get('gbps') or 0, r.get('objects_per_s'), r.get('p50_ms'), r.get('p99_ms'),
                      r.get('cpu_s_per_gb'))
            p.verified = bool(r.get('verified'))
            legs.setdefault(r['backend'], []).append((p, r))
    threads, qd = 1, None
    for backend in ('kmod', 'uring', 'uring_cmd'):
        pts = legs.get(backend, [])
        m = median_point([p for p, _ in pts])
        if not m:
            rows.append((f'libkvblk {backend}', None, None, None, 'no result'))
            ok = False
            continue
        r = next(r for p, r in pts if p is m)
        threads = max(threads, r.get('workers') or 1)
        qd = qd or r.get('queue_depth')
        nv = sum(1 for p, _ in pts if p.verified)
        rows.append((f'libkvblk {backend}', r.get('workers'), r.get('queue_depth'), m,
                     f'runs {runs(p for p, _ in pts)}; verified {nv}/{len(pts)}'))
    try:
        with open(os.path.join(d, 'equal-threads.txt')) as f:
            threads, qd = (int(x) for x in f.read().split())
    except (OSError, ValueError):
        pass

    # The fio search: median per point over the rounds.
    search = {}  # (engine, fb, nj, iod) -> [Point]
    pat = re.compile(r'fio-(io_uring(?:_cmd)?)-fb(\d)-j(\d+)-qd(\d+)-(\d+)\.json$')
    for path in glob.glob(os.path.join(d, 'fio-*.json')):
        m = pat.search(path)
        if m:
            key = (m[1], int(m[2]), int(m[3]), int(m[4]))
            search.setdefault(key, []).append(fio_point(path, object_bytes))
    medians = {k: median_point(v) for k, v in search.items()}
    fio_rows = {}
    for eng in ('io_uring', 'io_uring_cmd'):
        dev = '/dev/ng0n1' if eng == 'io_uring_cmd' else '/dev/nvme0n1 O_DIRECT'
        for kind in ('equal threads', 'best'):
            cand = [(k, p) for k, p in medians.items() if p and k[0] == eng and
                    (kind == 'best' or (k[2] == threads and k[3] == qd))]
            name = f'fio {eng} {kind}'
            if not cand:
                rows.append((name, None, None, None, f'{dev}: no result (see fio-{eng}-*.json.err)'))
                ok = False
                continue
            k, p = max(cand, key=lambda kp: kp[1].gbps)
            fio_rows[(eng, kind)] = p
            rows.append((name, k[2], k[3], p, f'{dev} fixedbufs={k[1]}; runs {runs(search[k])}'))
    npoints = len(search)
    nrounds = max((len(v) for v in search.values()), default=0)

    print(f"VM bench: {cfg.get('cmd_bytes', '?')}-byte commands, "
          f"{cfg.get('batch_objects', '?')} objects of {object_bytes >> 20} MiB per load_many, "
          f"one namespace; medians of {nrounds} interleaved rounds")
    print('(QEMU TCG: absolute numbers are meaningless, ratios within this run are the point)')
    hdr = (f"{'leg':<31} {'thr':>3} {'QD':>4} {'GB/s':>7} {'obj/s':>7} {'p50 ms':>7} {'p99 ms':>7} "
           f"{'CPU s/GB':>8}  notes")
    print(hdr)
    print('=' * 113)

    def f(v, w, prec):
        return f'{v:{w}.{prec}f}' if v is not None else ' ' * (w - 1) + '-'
    for name, thr, q, p, note in rows:
        print(f"{name:<31} {thr if thr is not None else '-':>3} {q if q is not None else '-':>4} "
              f"{f(p and p.gbps, 7, 3)} {f(p and p.objs_s, 7, 1)} {f(p and p.p50_ms, 7, 2)} "
              f"{f(p and p.p99_ms, 7, 2)} {f(p and p.cpu, 8, 3)}  {note}")
    print('=' * 113)
    print(f'libkvblk: p50/p99 of load_many calls ({cfg.get("batch_objects", "?")} objects), CPU = user+system '
          f'of the process (kvblk-bench). fio: p50/p99 of one command (fio has no batches), CPU = '
          f'user+system of its jobs; searched over {npoints} points (engine x fixedbufs 0/1 x '
          f'numjobs 1..{threads} x iodepth), "equal threads" = numjobs {threads}, iodepth {qd}.')

    by = {name: p for name, _, _, p, _ in rows if p}

    def ratio(a, b):
        x, y = by.get(a), by.get(b)
        if not x or not y or not y.gbps:
            return '-'
        if b.endswith(' best') and x.gbps > CEILING_SLACK * y.gbps:
            return f'ceiling not found ({x.gbps:.3f} > {CEILING_SLACK} x {y.gbps:.3f} GB/s)'
        return f'{x.gbps / y.gbps:.2f}'

    print('Ratios (GB/s):')
    user = ['libkvblk uring', 'libkvblk uring_cmd', 'fio io_uring equal threads',
            'fio io_uring_cmd equal threads']
    for b in user + ['fio io_uring best', 'fio io_uring_cmd best']:
        print(f'  {"libkvblk kmod / " + b:<50} {ratio("libkvblk kmod", b)}')
    for a, b in (('libkvblk uring_cmd', 'fio io_uring_cmd best'), ('libkvblk uring', 'fio io_uring best')):
        print(f'  {a + " / " + b:<50} {ratio(a, b)}')
    k = by.get('libkvblk kmod')
    if k:
        behind = [b for b in user if b in by and k.gbps < by[b].gbps]
        cpus = {n: p.cpu for n, p in by.items() if p.cpu is not None}
        lowest = min(cpus, key=cpus.get) if cpus else None
        print(f"Goal (issue 13.3): kmod >= every userspace path with equal threads (W={threads}, "
              f"QD={qd}): {'yes' if not behind else 'NO (behind ' + ', '.join(behind) + ')'}; "
              f"lowest CPU s/GB of all legs: "
              f"{'yes' if lowest == 'libkvblk kmod' else 'NO (' + str(lowest) + ')'}")
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


def dso_share(d, backend, name):
    """Percent of perf's samples (both vCPUs) in the module/binary NAME, or None."""
    try:
        with open(os.path.join(d, f'perf-{backend}-dso.txt')) as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 2 and parts[0].endswith('%') and name in parts[-1]:
                    return float(parts[0].rstrip('%'))
    except (OSError, ValueError):
        pass
    return None


def idle_share(d, backend):
    """Percent of perf's samples in the idle loop (both vCPUs), or None."""
    try:
        with open(os.path.join(d, f'perf-{backend}-top.txt')) as f:
            tot = 0.0
            for line in f:
                parts = line.split()
                if len(parts) >= 2 and parts[0].endswith('%') and \
                        any(s in parts[-1] for s in ('default_idle', 'native_safe_halt', 'acpi_idle',
                                                     'pv_native_safe_halt', 'cpu_idle')):
                    tot += float(parts[0].rstrip('%'))
            return tot
    except (OSError, ValueError):
        return None


def profile(d):
    """The load path alone (kvblk_loadloop, fio time_based): median GB/s, busy guest CPU per GB."""
    lines = []
    for b in ('kmod', 'uring', 'uring_cmd', 'fio io_uring_cmd'):
        pts = []
        for path in sorted(glob.glob(os.path.join(d, f'loadloop-{b.replace(" ", "-")}-*'))):
            r = path.rsplit('-', 1)[1].split('.')[0]
            try:
                if b.startswith('fio'):
                    p = fio_point(path, 1)
                    with open(path) as f:
                        text = f.read()
                    nbytes = json.loads(text[text.index('{'):])['jobs'][0]['read']['io_bytes']
                    gbps = p.gbps
                else:
                    with open(path) as f:
                        text = f.read().split()
                    gbps, nbytes = float(text[1]), int(text[3].lstrip('(')) * 1048576
            except (OSError, ValueError, KeyError, IndexError, TypeError, AttributeError):
                continue
            c = counters(os.path.join(d, f'busy-{b.replace(" ", "-")}-{r}.txt'))
            mib = nbytes / 1048576
            p = Point(gbps)
            p.vals = (c[0] / (nbytes / 1e9), c[1] / mib, c[2] / mib) if c else (None,) * 3
            pts.append(p)
        if not pts:
            continue
        m = median_point(pts)
        cols = ' '.join(f'{v:9.2f}' if v is not None else '        -' for v in m.vals)
        name = b if b.startswith('fio') else 'libkvblk ' + b
        extra = ''
        if b == 'kmod' and m.vals[0] is not None:
            share, idle = dso_share(d, 'kmod', 'kvblk'), idle_share(d, 'kmod')
            if share is not None and idle is not None and idle < 100:
                busy_share = share / (100 - idle)
                extra = (f'  kvblk.ko: {share:.1f}% of samples = {busy_share * 100:.1f}% of busy '
                         f'= {busy_share * m.vals[0]:.3f} s/GB')
        lines.append(f'  {name:<26} {m.gbps:8.3f} {cols}  runs {runs(pts)}{extra}')
    if lines:
        print('Load path alone, 3 s per run, legs alternating (kvblk_loadloop; fio time_based), no '
              'verification; whole guest (2 vCPUs): busy CPU (user+system+irq) per GB, context '
              'switches and NVMe interrupts per MiB; kvblk.ko\'s own share from perf (--sort dso):')
        print(f'  {"leg":<26} {"GB/s":>8} {"CPU s/GB":>9} {"ctxsw/MiB":>9} {"irq/MiB":>9}')
        print('\n'.join(lines))


if __name__ == '__main__':
    sys.exit(main())
