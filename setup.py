# SPDX-License-Identifier: MIT
"""setuptools' half of pyproject.toml: the extension kvblk._kvblk is built by CMake.

Which libkvblk the extension uses is KVBLK_LIBKVBLK's choice:

  tree    (the default) this tree's libkvblk is built (only what the Python package needs:
          libkvblk.so and the extension, Release, no tools, no tests) and bundled in the
          package as kvblk/libkvblk.so.0, found by the extension through RPATH $ORIGIN. The
          bindings and the library then come from one commit, and a wheel installs in any
          virtual environment of the same distribution without libkvblk0 (it needs what
          libkvblk itself links: liburing2, libisal2, libstdc++6).
  system  the libkvblk that pkg-config finds as `kvblk` (libkvblk-dev, or PKG_CONFIG_PATH to
          another prefix) is linked, nothing of it bundled; only python/ is compiled. For a
          host whose libkvblk comes from its packages (one library for kvblkctl, the
          engines and Python, updated with them).

The tree wins unless asked: the extension is compiled against the header it was written
for, whatever libkvblk-dev happens to be installed. Output of the choice: pip -v prints it,
and kvblk/_build_info.py records it (`python3 -m kvblk info` shows it).

CMake runs in build/pip/ of the source tree (pip builds a local directory in place), so a
`pip wheel` after a `pip install` of the same checkout compiles nothing again. Jobs:
CMAKE_BUILD_PARALLEL_LEVEL, else the number of CPUs. KVBLK_CMAKE_ARGS: more CMake arguments,
after the defaults (tests/packaging/pip-test.sh passes -DCMAKE_BUILD_TYPE=None: no -O2, to
compile faster).
"""

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
VERSION = (ROOT / "VERSION").read_text().split()[0]


def _log(msg):
    print(f"kvblk build: {msg}", file=sys.stderr, flush=True)


def _pkg_config(*args):
    try:
        r = subprocess.run(["pkg-config", *args, "kvblk"], capture_output=True, text=True, check=False)
    except FileNotFoundError:
        return None
    return r.stdout.strip() if r.returncode == 0 else None


def choose_libkvblk():
    """(mode, why): "tree" or "system" (see the module docstring)."""
    mode = os.environ.get("KVBLK_LIBKVBLK", "tree").strip() or "tree"
    if mode not in ("tree", "system"):
        raise SystemExit(f"kvblk build: KVBLK_LIBKVBLK={mode!r} is neither 'tree' nor 'system'")
    if mode == "system":
        v = _pkg_config("--modversion")
        if v is None:
            raise SystemExit("kvblk build: KVBLK_LIBKVBLK=system but pkg-config finds no kvblk "
                             "(install libkvblk-dev, or set PKG_CONFIG_PATH to the prefix's "
                             "lib/pkgconfig)")
        why = f"KVBLK_LIBKVBLK=system: libkvblk {v} from pkg-config"
        if v != VERSION:
            why += f" (this tree is {VERSION}: the extension is compiled against the installed header)"
        return "system", why
    if not (ROOT / "libkvblk" / "CMakeLists.txt").exists():
        raise SystemExit("kvblk build: this tree has no libkvblk/ to build; "
                         "set KVBLK_LIBKVBLK=system to use an installed libkvblk-dev")
    return "tree", f"this tree's libkvblk {VERSION}, bundled (KVBLK_LIBKVBLK=tree, the default)"


class CMakeExtension(Extension):
    def __init__(self, name):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        mode, why = choose_libkvblk()
        _log(f"libkvblk: {why}")
        tag = f"{mode}-{sysconfig.get_config_var('SOABI') or sys.implementation.cache_tag}"
        bdir = ROOT / "build" / "pip" / tag
        stage = bdir / "stage"
        if stage.exists():
            shutil.rmtree(stage)
        gen = ["-G", "Ninja"] if shutil.which("ninja") else []
        common = [f"-DPython3_EXECUTABLE={sys.executable}", "-DCMAKE_BUILD_TYPE=Release",
                  "-DKVBLK_PYTHON_INSTALL_DIR=.", "-DBUILD_TESTING=OFF",
                  *os.environ.get("KVBLK_CMAKE_ARGS", "").split()]
        if mode == "tree":
            cfg = ["cmake", "-S", str(ROOT), "-B", str(bdir), *gen, *common,
                   "-DKVBLK_WITH_TOOLS=OFF", "-DKVBLK_WERROR=OFF", "-DKVBLK_PYTHON_BUNDLE_LIBKVBLK=ON"]
        else:
            cfg = ["cmake", "-S", str(ROOT / "python"), "-B", str(bdir), *gen, *common]
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 1)
        for cmd in (cfg,
                    ["cmake", "--build", str(bdir), "--target", "kvblk_python", "-j", jobs],
                    ["cmake", "--install", str(bdir), "--component", "python", "--prefix", str(stage)]):
            _log(" ".join(cmd))
            subprocess.run(cmd, check=True, stdout=sys.stderr)

        pkg = stage / "kvblk"
        out = Path(self.get_ext_fullpath(ext.name)).parent
        out.mkdir(parents=True, exist_ok=True)
        built = sorted(pkg.glob("_kvblk*.so"))
        if len(built) != 1:
            raise SystemExit(f"kvblk build: expected one _kvblk*.so in {pkg}, found {built}")
        shutil.copy2(built[0], self.get_ext_fullpath(ext.name))
        lib = None
        if mode == "tree":
            shutil.copy2(pkg / "libkvblk.so.0", out / "libkvblk.so.0")
            lib = "kvblk/libkvblk.so.0"
        else:
            lib = _pkg_config("--variable=libdir")
        (out / "_build_info.py").write_text(
            "# Written by setup.py: how this kvblk package was built.\n"
            f"LIBKVBLK = {mode!r}  # 'tree': bundled libkvblk.so.0; 'system': pkg-config's\n"
            f"LIBKVBLK_AT = {lib!r}\n"
            f"REASON = {why!r}\n"
            f"SOURCE_VERSION = {VERSION!r}\n")


setup(
    version=VERSION,
    ext_modules=[CMakeExtension("kvblk._kvblk")],
    cmdclass={"build_ext": CMakeBuild},
    options={"build": {"build_base": str(Path("build") / "pip" / "setuptools")},
             "egg_info": {"egg_base": str(Path("build") / "pip")}},
)
