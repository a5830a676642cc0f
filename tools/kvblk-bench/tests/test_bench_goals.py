#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""make bench's goal table (tools/kvblk-bench/bench.py) on synthetic kvblk-bench documents."""
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import bench  # noqa: E402


def doc(status="found", uring_fio=0.99, uring_psync=3.0, cpu=0.3):
    knobs = {"engine": "libaio", "iodepth": 32, "numjobs": 1, "in_flight": 32, "fixedbufs": False,
             "registerfiles": False, "name": "libaio QD 32"}
    return {
        "host": {"hostname": "h", "cpus": 2, "cpu_model": "cpu", "mem_total_bytes": 2**34, "kernel": "6.1"},
        "target": {"filesystem": "ext4", "block_device": "/dev/vda"},
        "workload": {"objects": 128, "order": "file", "object_bytes": 16 << 20, "mixed_sizes": False,
                     "one_file_per_object": False},
        "search": {"points_run": 2, "seconds": 3.0,
                   "points": [{"ok": True, "gbps": 1.0, "config": dict(knobs, iodepth=1, in_flight=1)},
                              {"ok": True, "gbps": 2.0, "config": knobs}]},
        "ceiling": {"status": status, "gbps": 2.0, "config": knobs, "rounds": 3, "worst_ratio": 1.2},
        "results": [{"backend": "psync", "in_flight": 1, "gbps": 0.6},
                    {"backend": "uring", "in_flight": 32, "gbps": 1.98}],
        "ratios": {"uring_over_fio_best": uring_fio if status == "found" else None,
                   "uring_over_psync": uring_psync, "uring_cpu_over_threadpool_cpu": cpu,
                   "best_uring": {"backend": "uring", "gbps": 1.98}, "file_loop": None},
    }


class Goals(unittest.TestCase):
    def test_all_met(self):
        rows = bench.evaluate({"large": doc(), "small": doc(uring_fio=0.95)})
        self.assertEqual([r[4] for r in rows], [True, True, True, True])
        self.assertEqual([r[2] for r in rows], [0.99, 0.95, 3.0, 0.3])

    def test_each_limit_is_a_miss_just_past_it(self):
        rows = bench.evaluate({"large": doc(uring_fio=0.969, uring_psync=2.69, cpu=0.51),
                               "small": doc(uring_fio=0.949)})
        self.assertEqual([r[4] for r in rows], [False, False, False, False])
        self.assertEqual([r[3] for r in rows], ["MISS"] * 4)

    def test_ceiling_not_found_is_a_miss_never_a_ratio(self):
        rows = bench.evaluate({"large": doc(status="not_found"), "small": doc()})
        self.assertEqual(rows[0][2], None)
        self.assertEqual(rows[0][3], "ceiling not found")
        self.assertFalse(rows[0][4])
        self.assertTrue(rows[2][4])  # uring / psync needs no ceiling

    def test_missing_workload_is_a_miss(self):
        rows = bench.evaluate({"large": doc()})
        self.assertEqual(rows[1][3], "not run")
        self.assertFalse(rows[1][4])

    def test_table_and_plot(self):
        merged = {"date": "2026-12-01 00:00 UTC", "machine": "m",
                  "workloads": {"large": doc(status="not_found"), "small": doc()}}
        text = bench.table(merged)
        self.assertIn("ceiling not found", text)
        self.assertIn("NOT FOUND", text)
        self.assertIn("MISS", text)
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            self.skipTest("no matplotlib")
        with tempfile.TemporaryDirectory() as d:
            png = os.path.join(d, "x.png")
            bench.plot(merged, png)
            with open(png, "rb") as f:
                self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")


if __name__ == "__main__":
    unittest.main()
