#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Two legs' perf profiles per I/O: where one leg spends more CPU per I/O than the other.

usage: perf-per-io.py A-NAME A-REPORT A-IOS B-NAME B-REPORT B-IOS PERIOD-US

REPORT: `perf report -n --no-children --sort comm,dso,sym -g none --stdio` of a system-wide
cpu-clock profile (`perf record -a`) taken while the leg ran; IOS: the I/Os the disk
completed during the recorded window; PERIOD-US: CPU microseconds per sample (1e6 / the
sampling period). Idle (the idle loop's symbols) and the profiler's own processes (perf,
the `sh` and `sleep` it times) are left out: they cost per second, not per I/O. Prints CPU
microseconds per I/O: in total, per DSO ([kernel.kallsyms], the library, the binary, ...), and the 15
symbols whose cost per I/O differs most between the legs (A minus B), so that a ratio of
the bench (IOPS per busy CPU second) is taken apart into the code that makes it.
"""
import re
import sys

IDLE = {'native_safe_halt', 'default_idle', 'pv_native_safe_halt', 'cpuidle_enter_state',
        'acpi_safe_halt', 'poll_idle', 'mwait_idle', 'intel_idle'}
PROFILER = {'perf', 'perf-exec', 'sleep', 'sh'}
LINE = re.compile(r'^\s*([\d.]+)%\s+(\d+)\s+(\S+)\s+(\S+)\s+\[(.)\]\s+(.+?)\s*$')


def load(path):
    """{(dso, symbol): samples} of a report, idle and the profiler left out."""
    out = {}
    with open(path, errors='replace') as f:
        for line in f:
            m = LINE.match(line)
            if not m:
                continue
            comm, dso, sym = m.group(3), m.group(4), m.group(6)
            if sym in IDLE or comm in PROFILER:
                continue
            out[(dso, sym)] = out.get((dso, sym), 0) + int(m.group(2))
    return out


def main():
    if len(sys.argv) != 8:
        sys.exit(__doc__)
    a_name, a_rep, a_ios, b_name, b_rep, b_ios, period = sys.argv[1:]
    a_ios, b_ios, period = int(a_ios), int(b_ios), float(period)
    if a_ios <= 0 or b_ios <= 0:
        print('no I/Os counted in a window (%s %d, %s %d): nothing per I/O' % (a_name, a_ios, b_name, b_ios))
        return
    a, b = load(a_rep), load(b_rep)
    if not a or not b:
        print('a report has no samples (%s %d, %s %d)' % (a_name, len(a), b_name, len(b)))
        return
    per = lambda n, ios: n * period / ios
    ta, tb = sum(a.values()), sum(b.values())
    print('CPU us per I/O, idle left out: %s %.3f (%d I/Os), %s %.3f (%d I/Os), %s / %s = %.3f'
          % (a_name, per(ta, a_ios), a_ios, b_name, per(tb, b_ios), b_ios, a_name, b_name,
             per(ta, a_ios) / per(tb, b_ios)))
    dsos = {}
    for (dso, _), n in a.items():
        dsos.setdefault(dso, [0, 0])[0] += n
    for (dso, _), n in b.items():
        dsos.setdefault(dso, [0, 0])[1] += n
    print('%-28s %10s %10s %10s' % ('by DSO', a_name, b_name, 'A - B'))
    for dso, (na, nb) in sorted(dsos.items(), key=lambda kv: -abs(per(kv[1][0], a_ios) - per(kv[1][1], b_ios))):
        da, db = per(na, a_ios), per(nb, b_ios)
        if max(da, db) < 0.005:
            continue
        print('%-28s %10.3f %10.3f %+10.3f' % (dso[:28], da, db, da - db))
    print('%-48s %10s %10s %10s' % ('symbols differing most', a_name, b_name, 'A - B'))
    keys = set(a) | set(b)
    diff = sorted(keys, key=lambda k: -abs(per(a.get(k, 0), a_ios) - per(b.get(k, 0), b_ios)))
    for k in diff[:15]:
        da, db = per(a.get(k, 0), a_ios), per(b.get(k, 0), b_ios)
        print('%-48s %10.3f %10.3f %+10.3f' % (k[1][:48], da, db, da - db))


if __name__ == '__main__':
    main()
