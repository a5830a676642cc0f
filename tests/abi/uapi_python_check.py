# SPDX-License-Identifier: MIT
"""tests/vm/kvblk_uapi.py against the C header: every struct's size, every field's offset
and every constant it describes equal what uapi_layout (built from include/uapi/linux/kvblk.h)
prints, and nothing the program prints is missing from the module, or the reverse.
usage: uapi_python_check.py UAPI_LAYOUT_PROGRAM MODULE_DIR"""
import subprocess
import sys

sys.path.insert(0, sys.argv[2])
import kvblk_uapi as u  # noqa: E402

c_facts = {}
for line in subprocess.run([sys.argv[1]], check=True, capture_output=True, text=True).stdout.splitlines():
    kind, name, value = line.split()
    c_facts[(kind, name)] = int(value)

py_facts = {}
for s in u.STRUCTS:
    py_facts[("struct", s.name)] = s.size
    for fname, _ in s.fields:
        py_facts[("field", "%s.%s" % (s.name, fname))] = s.offsets[fname]
for name, value in u.CONSTANTS.items():
    py_facts[("const", name)] = value

fails = 0
for key in sorted(set(c_facts) | set(py_facts)):
    c, p = c_facts.get(key), py_facts.get(key)
    if c != p:
        print("FAIL: %s %s: header %s, kvblk_uapi.py %s" % (key[0], key[1], c, p))
        fails += 1
print("uapi_python_check: %d facts compared, %d differ" % (len(c_facts), fails))
sys.exit(1 if fails else 0)
