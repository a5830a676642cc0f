# SPDX-License-Identifier: MIT
"""kvblk.defaults: the process-wide defaults of kvblk.open(), as kvikio.defaults.

One table lives in libkvblk (kvblk_get_default(3)); this object reads and sets it, so the C
library, C++ engines in the same process and Python see the same values:

    kvblk.defaults.get("queue_depth")               # 64, or $KVBLK_QUEUE_DEPTH, or what was set
    kvblk.defaults.set("queue_depth", 128)          # every later open; returns a context manager:
    with kvblk.defaults.set({"backend": "psync", "threads": 4}):
        dev = kvblk.open(path)                      # psync ... restored when the block ends
    kvblk.defaults.reset()                          # back to the environment / built-in values
    kvblk.defaults.all()                            # {name: value}
    kvblk.defaults.describe()                       # every field of the table (docs/defaults.md)

An option that kvblk.open() gets as 0 (its default) takes the value in force when the open
starts; backend="auto" takes the default backend. The environment variables (KVBLK_BACKEND,
KVBLK_QUEUE_DEPTH, ...) are read at each open until a value is set here; a set value wins
until reset(). Errors: kvblk.Error ENOENT unknown name, EINVAL a value out of range or an
environment variable that does not parse (the message names it).
"""

import builtins
import errno

from . import _kvblk
from ._errors import Error

_BACKENDS = list(_kvblk.BACKEND_NAMES)


def _to_c(name, value):
    if name == "backend" and isinstance(value, str):
        if value not in _BACKENDS:
            raise Error(errno.EINVAL, f"kvblk.defaults: unknown backend {value!r} "
                                      f"(one of {', '.join(_BACKENDS)})")
        return _BACKENDS.index(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"kvblk.defaults: {name} takes an int"
                        + (" or a backend name" if name == "backend" else "")
                        + f", not {type(value).__name__}")
    if value < 0:
        raise Error(errno.EINVAL, f"kvblk.defaults: {name} {value} is negative")
    return value


def _from_c(name, value):
    if name == "backend":
        return _BACKENDS[value] if 0 <= value < len(_BACKENDS) else value
    return value


class _Restore:
    """What set() returns: used in a ``with`` block, the previous values come back at its end
    (a default that was not set before is reset, so the environment applies again)."""

    __slots__ = ("_previous",)

    def __init__(self, previous):
        self._previous = previous

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for name, value in self._previous.items():
            if value is None:
                _kvblk.default_reset(name)
            else:
                _kvblk.default_set(name, value)
        return False


class Defaults:
    """The process-wide defaults (module docstring); the one instance is kvblk.defaults."""

    def names(self):
        """The defaults' names, in table order."""
        return [d["name"] for d in _kvblk.default_info()]

    def get(self, name):
        """The value in force for ``name``: an int, or the backend's name for "backend"."""
        return _from_c(name, _kvblk.default_get(name))

    def set(self, *args, **kwargs):
        """Set defaults for every later kvblk.open(), on every thread:
        ``set(name, value)``, ``set({name: value, ...})`` or ``set(name=value, ...)``.
        All are checked before any is kept: on an error nothing changed. Returns a context
        manager that restores the previous values when its ``with`` block ends."""
        if len(args) == 2 and not kwargs:
            pairs = {args[0]: args[1]}
        elif len(args) == 1 and isinstance(args[0], dict) and not kwargs:
            pairs = dict(args[0])
        elif not args and kwargs:
            pairs = kwargs
        else:
            raise TypeError("kvblk.defaults.set(name, value), set({name: value, ...}) or "
                            "set(name=value, ...)")
        info = {d["name"]: d for d in _kvblk.default_info()}
        for name in pairs:
            if name not in info:
                raise Error(errno.ENOENT, f"kvblk.defaults: no default is called {name!r} "
                                          f"(one of {', '.join(info)})")
        values = {name: _to_c(name, v) for name, v in pairs.items()}
        previous = {name: (info[name]["value"] if info[name]["source"] == "set" else None)
                    for name in values}
        done = _Restore({})
        try:
            for name, v in values.items():
                prev = previous[name]
                _kvblk.default_set(name, v)
                done._previous[name] = prev
        except BaseException:
            done.__exit__(None, None, None)
            raise
        return _Restore(previous)

    def reset(self, name=None):
        """Forget what set() set for ``name`` (None: every default): the environment variable,
        else the built-in value, applies again."""
        _kvblk.default_reset(name)

    def all(self):
        """{name: value in force} for every default (an invalid environment variable raises)."""
        return {name: self.get(name) for name in self.names()}

    def describe(self):
        """Every default as a dict: name, env (its variable), unit, doc, builtin, min, max,
        value (in force), source ("builtin", "env" or "set"), error (EINVAL when the variable
        is set and invalid, else 0). Backend values are names."""
        out = []
        for d in _kvblk.default_info():
            d = builtins.dict(d)
            for k in ("builtin", "min", "max", "value"):
                d[k] = _from_c(d["name"], d[k])
            out.append(d)
        return out

    def __repr__(self):
        try:
            return f"<kvblk.defaults {self.all()}>"
        except Error as e:
            return f"<kvblk.defaults: {e.strerror}>"


defaults = Defaults()
