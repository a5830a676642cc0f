#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""End-to-end checks of kvblk-bench on a tiny store (ctest label "bench").

usage: check_bench.py smoke|corruption|blockdev KVBLK_BENCH WORKDIR

blockdev runs on a loop device (root only; exits 77, "skipped", elsewhere).
The store lives in a fresh directory under WORKDIR (the build tree: a real
file system, where O_DIRECT works; tmpfs may refuse it) and is removed after.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

OBJECTS = 8
OBJECT_BYTES = 256 * 1024
CMD_BYTES = 128 * 1024
BACKENDS = ["psync", "threadpool", "uring", "bare-uring"]


def run(bench, args, expect_rc=0):
    p = subprocess.run([bench] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=240)
    if p.returncode != expect_rc:
        sys.exit(f"FAIL: {' '.join(args)}: exit {p.returncode}, expected {expect_rc}\n"
                 f"stdout:\n{p.stdout}\nstderr:\n{p.stderr}")
    return p


def run_json(bench, args, expect_rc=0):
    p = run(bench, args + ["-o", "json"], expect_rc)
    try:
        return json.loads(p.stdout)
    except json.JSONDecodeError as e:
        sys.exit(f"FAIL: {' '.join(args)}: stdout is not one JSON document: {e}\n{p.stdout}")


def check(cond, msg):
    if not cond:
        sys.exit(f"FAIL: {msg}")


def base_args(store):
    return ["-n", str(OBJECTS), "--object-kib", str(OBJECT_BYTES // 1024), "-f", store, "-q",
            "--cmd-size", str(CMD_BYTES)]


def expected_commands(backend):
    # Commands a clean pass issues (resubmissions are added on top):
    # psync, uring and the bare io_uring loop split each object into cmd-size
    # commands, the thread pool reads each whole object with one pread.
    if backend == "threadpool":
        return OBJECTS
    return OBJECTS * (OBJECT_BYTES // CMD_BYTES)


def check_results(doc, backends, what):
    check(doc.get("schema_version") == 2, f"{what}: schema_version")
    res = doc["results"]
    seen = [r["backend"] for r in res]
    for b in backends:
        check(b in seen, f"{what}: backend {b} missing from results {seen}")
    for r in res:
        tag = f"{what}: {r['backend']} W={r['workers']} QD={r['queue_depth']}"
        check(r["verified"] is True, f"{tag}: not verified: {r.get('error')}")
        check(r["mismatched_bytes"] == 0 and r["failed_objects"] == 0 and r["failed_calls"] == 0,
              f"{tag}: failures reported")
        check(r["backend"] == r["requested_backend"], f"{tag}: served by {r['backend']}")
        check(r["objects"] == OBJECTS and r["object_bytes"] == OBJECT_BYTES, f"{tag}: store shape")
        check(r["gbps"] > 0 and r["objects_per_s"] > 0, f"{tag}: no throughput")
        check(r["p99_ms"] >= r["p50_ms"] > 0, f"{tag}: latencies")
        check(r["cpu_s_per_gb"] >= 0 and r["peak_rss_mib"] > 0, f"{tag}: cpu/rss")
        want = expected_commands(r["backend"]) + r["eagain_retries"] + r["short_resubmits"]
        check(r["commands"] == want, f"{tag}: {r['commands']} commands, expected {want}")
        check(r["fallbacks"] == 0, f"{tag}: {r['fallbacks']} fallbacks")


def smoke(bench, tmp):
    store = os.path.join(tmp, "store.bin")
    args = base_args(store) + ["--backends", ",".join(BACKENDS), "--threads", "2", "--qd", "4,16",
                               "--batch-objects", "3", "--no-fio"]
    doc = run_json(bench, args)
    check(doc["store"]["action"] == "created", "first run did not create the store")
    check(os.path.getsize(store) == OBJECTS * OBJECT_BYTES, "store size")
    meta = json.load(open(store + ".meta"))
    check(meta["objects"] == OBJECTS and meta["layout"] == f"uniform {OBJECTS} x {OBJECT_BYTES}", "sidecar contents")
    check(doc["ceiling"]["status"] == "disabled" and doc["ceiling"]["gbps"] is None, "--no-fio still has a ceiling")
    check(doc["workload"]["objects"] == OBJECTS and doc["workload"]["order"] == "file", "workload shape")
    check_results(doc, BACKENDS, "create run")
    # psync, threadpool W=2, uring at QD 4 and 16, bare-uring at the largest (16).
    check(len(doc["results"]) == 1 + 1 + 2 + 1, f"expected 5 settings, got {len(doc['results'])}")
    bare = [r for r in doc["results"] if r["backend"] == "bare-uring"]
    check(bare[0]["queue_depth"] == 16 and bare[0]["workers"] == 1, f"bare-uring at {bare[0]['queue_depth']}")
    check(doc["ratios"]["uring_over_bare_uring"] is not None and doc["ratios"]["bare_uring"]["queue_depth"] == 16,
          "uring/bare-uring ratio missing")
    check(all(r["fraction_of_ceiling"] is None for r in doc["results"]), "fraction without a ceiling")
    check(doc["ratios"]["uring_over_psync"] is not None, "uring/psync ratio missing")

    doc = run_json(bench, args)
    check(doc["store"]["action"] == "reused", "second run did not reuse the store")
    check_results(doc, BACKENDS, "reuse run")

    # A load window smaller than the store (several windows, each loaded then verified).
    doc = run_json(bench, base_args(store) + ["--backends", "psync,uring", "--qd", "8", "--batch-objects", "3",
                                              "--buffer-mib", "1", "--repeat", "2", "--no-fio"])
    check(doc["config"]["window_batches"] == 1, f"window of {doc['config']['window_batches']} batches, expected 1")
    check_results(doc, ["psync", "uring"], "windowed run")
    check(all(len(r["gbps_repeats"]) == 2 for r in doc["results"]), "--repeat 2 did not run two passes")

    # Text output carries the table and the ratios.
    p = run(bench, args)
    for s in ["Backend", "Verified", "uring / fio best", "uring / psync", "Every object verified"]:
        check(s in p.stdout, f"text output lacks '{s}':\n{p.stdout}")

    # Random order and mixed sizes: every object verified wherever it lands.
    doc = run_json(bench, ["--workload", "mixed", "-n", "12", "-f", os.path.join(tmp, "mixed.bin"), "-q",
                           "--backends", "psync,uring", "--qd", "8", "--batch-objects", "5", "--repeat", "1",
                           "--no-fio"])
    # -n changes the preset's shape: the workload is then named custom.
    check(doc["workload"]["name"] == "custom" and doc["workload"]["mixed_sizes"] is True, "mixed workload")
    check(doc["workload"]["order"] == "random", "mixed workload order")
    for r in doc["results"]:
        check(r["verified"] and r["total_bytes"] == doc["workload"]["total_bytes"], f"mixed {r['backend']}")

    if shutil.which("fio"):
        fio_checks(bench, tmp, store)
    print("kvblk-bench smoke: ok")


def check_ceiling(doc, rc):
    """The verdict, the ratios and the exit status agree with the figures."""
    c = doc["ceiling"]
    check(c["status"] in ("found", "not_found"), f"ceiling status {c['status']}: {c.get('note')}")
    fin = [f for f in doc["search"]["finalists"] if f["ok"]]
    check(fin, "no finalist succeeded")
    check(c["gbps"] == max(f["gbps"] for f in fin), "the ceiling is not the best finalist median")
    for f in fin:
        runs = sorted(f["gbps_repeats"])
        check(len(runs) == doc["config"]["repeat"], f"finalist {f['config']['name']}: {len(runs)} runs")
        check(f["gbps"] == runs[(len(runs) - 1) // 2], f"finalist {f['config']['name']} is not its median run")
    over = [r for r in doc["results"] if r["gbps"] > c["slack"] * c["gbps"]]
    check((c["status"] == "not_found") == bool(over), f"status {c['status']} with {len(over)} results above")
    for r in doc["results"]:
        if over:
            check(r["fraction_of_ceiling"] is None, "a ratio against a ceiling that was not found")
        else:
            check(abs(r["fraction_of_ceiling"] - r["gbps"] / c["gbps"]) < 1e-9, "fraction_of_ceiling")
        check(r["above_ceiling"] == (r in over), "above_ceiling")
    check(rc == (3 if over else 0), f"exit {rc} with ceiling {c['status']}")


def fio_checks(bench, tmp, store):
    # A tiny search: both engines, depths 1 and 4, up to 2 jobs; 3 rounds.
    args = base_args(store) + ["--backends", "psync,uring", "--qd", "8", "--fio-qd", "1,4", "--fio-max-jobs", "2",
                               "--fio-runtime", "5", "--repeat", "3", "-o", "json"]
    p = subprocess.run([bench] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=240)
    check(p.returncode in (0, 3), f"exit {p.returncode}: {p.stderr}")
    doc = json.loads(p.stdout)
    s = doc["search"]
    check(s["points_run"] == len(s["points"]) > 0 and s["seconds"] > 0, "search bookkeeping")
    stages = {pt["stage"] for pt in s["points"]}
    check(stages == {"depth", "jobs", "spread", "refine"}, f"search stages {stages}")
    per_call = min(16, OBJECTS)  # --batch-objects 16
    check(s["spread_jobs"] == per_call, f"spread_jobs {s['spread_jobs']}")
    check(any(pt["config"]["spread"] and pt["config"]["numjobs"] == per_call for pt in s["points"]),
          "no point with a job per object of a call")
    check(s["stage_bests"] and all(b["remeasured_gbps"] is None or
                                   b["reproduced"] == (b["remeasured_gbps"] >= 0.95 * b["search_gbps"])
                                   for b in s["stage_bests"]), "stage_bests")
    engines = {pt["config"]["engine"] for pt in s["points"]}
    check(engines == {"io_uring", "libaio", "psync"}, f"search engines {engines}")
    check(all(pt["config"]["iodepth"] == 1 for pt in s["points"] if pt["config"]["engine"] == "psync"),
          "psync at a depth other than 1")
    check(any(pt["config"]["numjobs"] == 2 for pt in s["points"]), "no 2-job point")
    check(all(pt["config"]["engine"] == "io_uring" for pt in s["points"]
              if pt["config"]["fixedbufs"] or pt["config"]["registerfiles"]), "io_uring knobs on libaio")
    # 2 (quick), then each stage's best, the best spread and lean points and each engine's best
    # when they are not among them.
    fin = s["finalists"]
    bests = [b["config"] for b in s["stage_bests"]]
    check(2 <= len(fin) <= 2 + len(bests) + 2 + len(engines),
          "quick search: 2 finalists (+ stage bests, best spread and lean, each engine's best)")
    engine_best = {}
    for pt in s["points"]:
        e = pt["config"]["engine"]
        if pt["ok"] and (e not in engine_best or pt["gbps"] > engine_best[e]["gbps"]):
            engine_best[e] = pt
    check(all(any(f["config"] == b["config"] for f in fin) for b in engine_best.values()),
          "an engine's best point is not a finalist")
    check(all(b["finalist"] for b in s["stage_bests"]), "a stage's best is not a finalist")
    check(any(f["config"]["spread"] for f in fin), "the best spread point is not a finalist")
    check(any(f["config"]["lean"] for f in fin), "the best lean point is not a finalist")
    check(all(f["config"] in bests or f["config"]["spread"] or f["config"]["lean"] or
              any(f["config"] == b["config"] for b in engine_best.values()) for f in fin[2:]),
          "an extra finalist that is neither a stage's best, spread, lean nor an engine's best")
    check(doc["ceiling"]["cmd_bytes"] == CMD_BYTES, "fio ran with another command size")
    check_ceiling(doc, p.returncode)
    check_results(doc, ["psync", "uring"], "fio run")

    # A search held to one 4 KiB command in flight cannot be the ceiling of
    # uring at QD 64 on a 64 MiB store: "ceiling not found", exit 3, no ratio;
    # with --allow-no-ceiling the same verdict and exit 0. (With 128 KiB
    # commands fio at QD 1 read 1.60 GB/s against uring's 1.67 once on this
    # virtio disk: 1.05 x, a ratio, and the test failed. 4 KiB: 0.09 against
    # 1.39 GB/s.)
    big = os.path.join(tmp, "big.bin")
    args = ["-n", "64", "-s", "1", "-f", big, "-q", "--backends", "uring", "--qd", "64", "--fio-qd", "1",
            "--cmd-size", "4K",
            "--fio-engines", "libaio", "--fio-max-jobs", "1", "--repeat", "3", "-o", "json"]
    p = subprocess.run([bench] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=240)
    doc = json.loads(p.stdout)
    check(doc["ceiling"]["status"] == "not_found", f"QD 1 ceiling vs uring QD 64: {doc['ceiling']}")
    check_ceiling(doc, p.returncode)
    check("ceiling not found" in p.stderr, f"stderr does not say so: {p.stderr}")
    p = run(bench, args[:-2] + ["--allow-no-ceiling"])
    check("ceiling not found" in p.stdout and "uring / fio best      = ceiling not found" in p.stdout,
          f"text output:\n{p.stdout}")

    # Chunks: one file per chunk, the serial loop and the ceiling over the same files.
    doc = run_json(bench, ["--workload", "chunks", "-n", "6", "--object-kib", "512", "-f", os.path.join(tmp, "c.bin"),
                           "-q", "--fio-qd", "1,4", "--fio-max-jobs", "1", "--repeat", "3", "--allow-no-ceiling",
                           "--backends", "uring", "--qd", "8", "--batch-objects", "6"])
    check(doc["workload"]["one_file_per_object"] and doc["target"]["kind"] == "files", "chunk files")
    check(len(os.listdir(os.path.join(tmp, "c.bin.chunks"))) == 6 + 1, "6 chunk files and a sidecar")
    check([r["backend"] for r in doc["results"]] == ["file-loop", "uring"], "chunks: the file loop, then uring")
    check(doc["results"][0]["verified"] and doc["results"][0]["commands"] == 6, "file-loop verified")
    # One batch over the 6 files: 6 x 512 KiB in 128 KiB commands, every byte verified.
    check(doc["results"][1]["verified"] and doc["results"][1]["commands"] == 24,
          f"uring over 6 chunk files: {doc['results'][1]}")
    check(doc["ceiling"]["status"] in ("found", "not_found"), "no ceiling over the chunk files")

    print("kvblk-bench smoke: ok")


def corruption(bench, tmp):
    store = os.path.join(tmp, "store.bin")
    args = base_args(store) + ["--no-fio"]
    run_json(bench, args + ["--backends", "psync"])

    # One flipped byte in the middle of object 5 (outside the sampled head
    # and tail), so that only the full verification can see it.
    victim = 5 * OBJECT_BYTES + 100_000
    with open(store, "r+b") as f:
        f.seek(victim)
        b = f.read(1)
        f.seek(victim)
        f.write(bytes([b[0] ^ 0x40]))
        f.flush()
        os.fsync(f.fileno())
    doc = run_json(bench, args + ["--keep", "--backends", "psync,uring,bare-uring", "--qd", "8"], expect_rc=1)
    check(len(doc["results"]) == 3, f"expected 3 settings, got {len(doc['results'])}")
    check(doc["store"]["action"] == "reused", "--keep rewrote the store")
    for r in doc["results"]:
        tag = f"{r['backend']}"
        check(r["verified"] is False, f"{tag}: a flipped byte verified")
        # One flipped byte, found once in every pass (round).
        passes = doc["config"]["repeat"]
        check(r["mismatched_bytes"] == passes, f"{tag}: {r['mismatched_bytes']} mismatched bytes, expected {passes}")
        check(r["failed_objects"] == 0, f"{tag}: failed objects")
        check("object 5" in (r["error"] or "") and "byte 100000" in r["error"], f"{tag}: error '{r['error']}'")
    check(doc["all_verified"] is False, "all_verified")

    # --keep refuses a store of another shape; the default mode rewrites it.
    run(bench, ["-n", str(OBJECTS + 1)] + args[2:] + ["--keep", "--backends", "psync", "-o", "json"], expect_rc=2)

    # A flipped byte where the reuse check samples makes the default mode rewrite.
    with open(store, "r+b") as f:
        f.seek(0)
        b = f.read(1)
        f.seek(0)
        f.write(bytes([b[0] ^ 1]))
        f.flush()
        os.fsync(f.fileno())
    doc = run_json(bench, args + ["--backends", "psync"])
    check(doc["store"]["action"] == "created", "a store failing the sample check was reused")
    check_results(doc, ["psync"], "rewritten store")
    print("kvblk-bench corruption: ok")


SKIP = 77  # ctest SKIP_RETURN_CODE


def blockdev(bench, tmp):
    # A loop device over a file in the build tree stands in for an NVMe namespace.
    if os.geteuid() != 0 or not shutil.which("losetup"):
        print("kvblk-bench blockdev: skipped (needs root and losetup)")
        sys.exit(SKIP)
    img = os.path.join(tmp, "disk.img")
    with open(img, "wb") as f:
        f.truncate(4 * 1024 * 1024)
    p = subprocess.run(["losetup", "-f", "--show", "--direct-io=on", img], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        print(f"kvblk-bench blockdev: skipped (no loop device: {p.stderr.strip()})")
        sys.exit(SKIP)
    dev = p.stdout.strip()
    try:
        args = ["--device", dev, "-n", str(OBJECTS), "--object-kib", str(OBJECT_BYTES // 1024), "-q",
                "--cmd-size", str(CMD_BYTES), "--no-fio", "--backends", ",".join(BACKENDS), "--threads", "2",
                "--qd", "8"]
        # Without the pattern and without permission nothing is written.
        p = run(bench, args, expect_rc=2)
        check("--i-know-this-overwrites" in p.stderr, f"refusal does not name the flag: {p.stderr}")
        with open(dev, "rb") as f:
            check(f.read(OBJECT_BYTES) == bytes(OBJECT_BYTES), "the device was written without permission")
        # With permission the store is written, then read and verified.
        doc = run_json(bench, args + ["--i-know-this-overwrites"])
        check(doc["store"]["action"] == "created" and doc["target"]["kind"] == "blockdev", "device store")
        check_results(doc, BACKENDS, "blockdev create")
        # Later runs without permission reuse it (read only).
        doc = run_json(bench, args)
        check(doc["store"]["action"] == "reused", "device store not reused")
        check_results(doc, BACKENDS, "blockdev reuse")
        # A store larger than the device is refused.
        run(bench, ["--device", dev, "-n", "64", "-s", "1", "-q", "--no-fio"], expect_rc=2)
    finally:
        subprocess.run(["losetup", "-d", dev])
    print("kvblk-bench blockdev: ok")


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in ("smoke", "corruption", "blockdev"):
        sys.exit(__doc__)
    mode, bench, workdir = sys.argv[1:]
    os.makedirs(workdir, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f"kvblk-bench-{mode}.", dir=workdir)
    try:
        {"smoke": smoke, "corruption": corruption, "blockdev": blockdev}[mode](bench, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
