#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""make bench: every kvblk-bench workload against its own searched ceiling, one goal table.

usage: bench.py --bench PATH [--out-dir DIR] [--workloads LIST] [--search MODE] [--repeat R]
                [--store-dir DIR] [-- EXTRA kvblk-bench ARGS]
       bench.py --from-json FILE [--out-dir DIR]     (table and plot of an earlier run)

Runs kvblk-bench once per workload (large, small, mixed, chunks) with the
thorough ceiling search and R interleaved rounds, keeps every document in
one JSON (DIR/<date>.json, with the date, the machine and the exact
commands), prints one line per speed goal (GOALS below) with the measured ratio and
pass/miss, and draws DIR/<date>.png: GB/s against commands in flight for each
backend, with fio's best point at each depth and the ceiling.

A benchmark, not a test: exit status 0 when every goal is met, 1 when one is
missed (or cannot be judged: no ceiling, or a ceiling not found), 2 when a run
failed (kvblk-bench exit 1 or 2: a load or a verification failed, bad setup).
"""
import argparse
import datetime
import json
import os
import shlex
import subprocess
import sys

# The speed goals on this machine (docs/results.md): (id, workload, ratio key, comparison, limit, text).
GOALS = [
    ("uring_vs_fio_16mib", "large", "uring_over_fio_best", ">=", 0.97,
     "libkvblk uring >= 0.97 x fio's best, 16 MiB objects"),
    ("uring_vs_fio_256kib", "small", "uring_over_fio_best", ">=", 0.95,
     "libkvblk uring >= 0.95 x fio's best, 256 KiB objects"),
    ("uring_vs_psync_16mib", "large", "uring_over_psync", ">=", 2.7,
     "uring >= 2.7 x psync (QD 1), 16 MiB objects"),
    ("uring_cpu_vs_threadpool", "large", "uring_cpu_over_threadpool_cpu", "<=", 0.5,
     "uring CPU s/GB <= 0.5 x the thread pool's, 16 MiB objects"),
]

WORKLOADS = ["large", "small", "mixed", "chunks"]

# kvblk settings per workload: a queue-depth sweep of uring over 1 to 8 rings
# and a thread-count sweep of the pool, so that the plot has a curve per
# backend. fio's jobs go up to the most workers of any kvblk setting (8):
# with uring on one ring only, "uring / fio best" compared one submitting
# thread with eight (2026-12-01: fio's best was 8 jobs x QD 128, ratio 0.41).
# bare-uring (one plain io_uring at QD 128 into the same buffer, no libkvblk) splits the
# rest of a gap into kvblk's own cost and the destination's.
SETTINGS = ["--backends", "psync,threadpool,uring,bare-uring", "--threads", "2,8", "--rings", "1,2,4,8",
            "--qd", "1,4,16,64,128"]


def evaluate(docs):
    """One row per goal: (goal, value or None, verdict text, met)."""
    rows = []
    for gid, wl, key, op, limit, text in GOALS:
        doc = docs.get(wl)
        value, why = None, None
        if doc is None:
            why = "not run"
        else:
            value = doc["ratios"].get(key)
            status = doc["ceiling"]["status"]
            if value is None and key.endswith("fio_best"):
                why = {"not_found": "ceiling not found", "absent": "no fio", "disabled": "no fio",
                       "failed": "fio failed"}.get(status, "no ceiling")
            elif value is None:
                why = "not measured"
        if value is None:
            rows.append((gid, text, None, why, False))
            continue
        met = value >= limit if op == ">=" else value <= limit
        rows.append((gid, text, value, "pass" if met else "MISS", met))
    return rows


def table(merged):
    docs = merged["workloads"]
    out = [f"make bench: {merged['date']}, {merged['machine']}"]
    for name, doc in docs.items():
        c = doc["ceiling"]
        best = doc["ratios"]["best_uring"] or doc["ratios"]["file_loop"]
        ceiling = (f"{c['gbps']:.3f} GB/s ({c['config']['name']}, median of {c['rounds']})"
                   if c["status"] == "found" else f"{c['status'].upper().replace('_', ' ')}"
                   + (f" (fio best {c['gbps']:.3f} GB/s; a kvblk setting at {c['worst_ratio']:.2f} x)"
                      if c["status"] == "not_found" else ""))
        out.append(f"  {name:<7} {doc['workload']['objects']:>5} objects, {doc['workload']['order']:<6} order: "
                   f"ceiling {ceiling}; search {doc['search']['points_run']} points in "
                   f"{doc['search']['seconds']:.0f} s"
                   + (f"; best {best['backend']} {best['gbps']:.3f} GB/s" if best else ""))
    out.append("")
    out.append(f"{'Goal':<60} {'Measured':>17} {'Result':>8}")
    out.append("=" * 87)
    for gid, text, value, verdict, met in evaluate(docs):
        shown = f"{value:.2f}" if value is not None else verdict
        out.append(f"{text:<60} {shown:>17} {'pass' if met else 'MISS':>8}")
    out.append("=" * 87)
    return "\n".join(out)


def plot(merged, png):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    docs = merged["workloads"]
    names = [n for n in WORKLOADS if n in docs] or list(docs)
    cols = 2 if len(names) > 1 else 1
    rows = (len(names) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(7 * cols, 4.6 * rows), squeeze=False)
    for ax, name in zip(axes.flat, names):
        doc = docs[name]
        # fio: the best searched point at each number of commands in flight.
        best = {}
        for p in doc["search"]["points"]:
            if p["ok"]:
                x = p["config"]["in_flight"]
                best[x] = max(best.get(x, 0), p["gbps"])
        if best:
            xs = sorted(best)
            ax.plot(xs, [best[x] for x in xs], "k--", marker=".", label="fio, best searched point")
        c = doc["ceiling"]
        if c["gbps"] is not None:
            ax.axhline(c["gbps"], color="grey", lw=0.8,
                       label=f"ceiling {c['gbps']:.2f} GB/s ({c['config']['name']})"
                       + ("" if c["status"] == "found" else ": NOT FOUND"))
        series = {}
        for r in doc["results"]:
            series.setdefault(r["backend"], []).append((r["in_flight"], r["gbps"]))
        for backend, pts in series.items():
            pts.sort()
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=f"libkvblk {backend}"
                    if backend != "file-loop" else "file-loop (open+pread per chunk)")
        wl = doc["workload"]
        kib = wl["object_bytes"] // 1024 if not wl["mixed_sizes"] else 0
        size = "mixed sizes" if not kib else f"{kib // 1024} MiB" if kib % 1024 == 0 else f"{kib} KiB"
        ax.set_title(f"{name}: {wl['objects']} x {size}, {wl['order']} order"
                     + (", one file each" if wl["one_file_per_object"] else ""), fontsize=10)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("commands in flight (uring rings x QD, threads, fio jobs x iodepth)")
        ax.set_ylabel("GB/s (medians)")
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
    for ax in list(axes.flat)[len(names):]:
        ax.axis("off")
    fig.suptitle(f"kvblk make bench, {merged['date']}, {merged['machine']}", fontsize=11)
    fig.tight_layout()
    fig.savefig(png, dpi=110)


def machine(doc):
    h = doc["host"]
    t = doc["target"]
    return (f"{h['hostname']}: {h['cpus']} x {h['cpu_model']}, {h['mem_total_bytes'] / 2**30:.0f} GiB, "
            f"kernel {h['kernel']}; {t['filesystem']} on {t['block_device']}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bench", help="kvblk-bench binary")
    ap.add_argument("--from-json", help="print the table and draw the plot of an earlier run")
    ap.add_argument("--out-dir", default="build/bench")
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--search", default="thorough", choices=["quick", "thorough"])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--store-dir", default=".", help="where the stores are kept (reused between runs)")
    ap.add_argument("extra", nargs="*", help="more kvblk-bench arguments (after --)")
    a = ap.parse_args()
    os.makedirs(a.out_dir, exist_ok=True)

    if a.from_json:
        merged = json.load(open(a.from_json))
        stem = os.path.splitext(a.from_json)[0]
    else:
        if not a.bench:
            ap.error("--bench or --from-json is required")
        now = datetime.datetime.now(datetime.timezone.utc)
        merged = {"tool": "kvblk make bench", "schema_version": 1, "date": now.strftime("%Y-%m-%d %H:%M UTC"),
                  "command": " ".join(shlex.quote(x) for x in sys.argv), "runs": [], "workloads": {}}
        failed = False
        for wl in a.workloads.split(","):
            cmd = [a.bench, "--workload", wl, "--search", a.search, "--repeat", str(a.repeat),
                   "--allow-no-ceiling", "-q", "-o", "json",
                   "-f", os.path.join(a.store_dir, "kvblk-store.bin" + ("" if wl in ("large", "chunks") else "." + wl))]
            # The chunks workload has no libkvblk setting yet (its file-loop leg only).
            cmd += (SETTINGS if wl != "chunks" else []) + a.extra
            print(f"bench: {' '.join(shlex.quote(x) for x in cmd)}", file=sys.stderr, flush=True)
            t0 = datetime.datetime.now()
            p = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
            secs = (datetime.datetime.now() - t0).total_seconds()
            merged["runs"].append({"workload": wl, "command": " ".join(shlex.quote(x) for x in cmd),
                                   "exit_status": p.returncode, "seconds": round(secs, 1)})
            if p.returncode != 0:
                print(f"bench: {wl}: kvblk-bench exited {p.returncode}", file=sys.stderr)
                failed = True
            try:
                merged["workloads"][wl] = json.loads(p.stdout)
            except json.JSONDecodeError:
                failed = True
        if not merged["workloads"]:
            sys.exit("bench: no workload ran")
        merged["machine"] = machine(next(iter(merged["workloads"].values())))
        merged["goals"] = [{"id": g, "goal": t, "value": v, "result": r, "met": m}
                           for g, t, v, r, m in evaluate(merged["workloads"])]
        merged["all_met"] = all(g["met"] for g in merged["goals"])
        stem = os.path.join(a.out_dir, now.strftime("%Y-%m-%dT%H%M%SZ"))
        with open(stem + ".json", "w") as f:
            json.dump(merged, f, indent=1)
            f.write("\n")
        if failed:
            print(table(merged))
            sys.exit(2)

    print(table(merged))
    try:
        plot(merged, stem + ".png")
        print(f"wrote {stem}.json and {stem}.png")
    except ImportError as e:
        print(f"bench: no plot ({e}; install python3-matplotlib); wrote {stem}.json", file=sys.stderr)
    sys.exit(0 if all(m for *_, m in evaluate(merged["workloads"])) else 1)


if __name__ == "__main__":
    main()
