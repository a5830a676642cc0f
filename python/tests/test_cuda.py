# SPDX-License-Identifier: MIT
"""GPU destinations without a GPU: objects with __cuda_array_interface__ or a CUDA DLPack
capsule are routed to KVBLK_MEM_CUDA, and libkvblk's own error comes back when no CUDA
runtime can be loaded ($KVBLK_CUDART points at a file that does not exist)."""

import ctypes
import os
import subprocess
import sys
import textwrap

import pytest

import kvblk

K4 = 4096


class FakeCudaArray:
    """What CuPy/Numba/torch CUDA tensors expose; the address is never dereferenced."""

    def __init__(self, addr, nbytes, readonly=False, strides=None):
        self.__cuda_array_interface__ = {
            "version": 3, "shape": (nbytes // 2,), "typestr": "<f2", "data": (addr, readonly),
            "strides": strides,
        }


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


class FakeDLPackCuda:
    """A CUDA tensor seen through DLPack (device type kDLCUDA = 2), 1-D float32."""

    def __init__(self, addr, nbytes, device_type=2):
        self._shape = (ctypes.c_int64 * 1)(nbytes // 4)
        self._mt = _DLManagedTensor()
        t = self._mt.dl_tensor
        t.data, t.ndim, t.shape, t.byte_offset = addr, 1, self._shape, 0
        t.device = _DLDevice(device_type, 0)
        t.dtype = _DLDataType(2, 32, 1)
        self._dev_type = device_type

    def __dlpack_device__(self):
        return (self._dev_type, 0)

    def __dlpack__(self, stream=None):
        new = ctypes.pythonapi.PyCapsule_New
        new.restype, new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
        return new(ctypes.addressof(self._mt), b"dltensor", None)


def test_cuda_array_interface_routes_to_mem_cuda():
    d = kvblk.resolve(FakeCudaArray(0x7F0000000000, 1 << 20))
    assert d.kind == kvblk.MEM_CUDA and d.source == "cuda_array_interface"
    assert d.addr == 0x7F0000000000 and d.nbytes == 1 << 20


def test_cuda_array_interface_checks():
    with pytest.raises(kvblk.Error, match="read-only"):
        kvblk.resolve(FakeCudaArray(0x7F0000000000, K4, readonly=True))
    with pytest.raises(kvblk.Error, match="not C-contiguous"):
        kvblk.resolve(FakeCudaArray(0x7F0000000000, K4, strides=(4,)))
    assert kvblk.resolve(FakeCudaArray(0x7F0000000000, K4, strides=(2,))).nbytes == K4


def test_dlpack_cuda_routes_to_mem_cuda():
    d = kvblk.resolve(FakeDLPackCuda(0x7F0000000000, 1 << 20))
    assert d.kind == kvblk.MEM_CUDA and d.source == "dlpack" and d.nbytes == 1 << 20
    with pytest.raises(kvblk.Error, match="DLPack device type 4 is not supported"):
        kvblk.resolve(FakeDLPackCuda(0x7F0000000000, K4, device_type=4))


# Run in a child: KVBLK_CUDART is read when libkvblk first loads the runtime, once per process.
_CHILD = textwrap.dedent("""
    import ctypes.util, errno, sys
    sys.path.insert(0, {tests!r})
    # No runtime: EOPNOTSUPP; a runtime but no GPU: ENODEV; a GPU: the fake address is not
    # device memory, EINVAL. Each is libkvblk's error for the staged CUDA registration.
    allowed = {{errno.EOPNOTSUPP, errno.ENODEV}}
    if ctypes.util.find_library("cudart"):
        allowed.add(errno.EINVAL)
    import kvblk
    from test_cuda import FakeCudaArray, FakeDLPackCuda
    path = sys.argv[1]
    with kvblk.open(path, "uring") as dev:
        for fake in (FakeCudaArray(0x7F0000000000, 1 << 16), FakeDLPackCuda(0x7F0000000000, 1 << 16)):
            host = kvblk.aligned_empty(4096)
            try:
                dev.load_many([(0, 4096, host), (4096, 4096, fake)])
            except kvblk.Error as e:
                assert e.errno in allowed, e
                assert e.bad_index == 1, e.bad_index
                assert "descriptor 1: kvblk_register_buffer" in e.strerror, e.strerror
                assert "CUDA" in e.strerror, e.strerror
            else:
                raise AssertionError("a CUDA destination loaded without a CUDA runtime")
            try:
                dev.register(fake)
            except kvblk.Error as e:
                assert e.errno in allowed and "CUDA" in e.strerror, e
            else:
                raise AssertionError("registered without a CUDA runtime")
            # Nothing was left registered: the host object still loads, alone.
            assert dev.load_many([(0, 4096, host)]).ok == 1
    print("ok")
""")


def test_cuda_destination_without_runtime_gives_librarys_error(store, tmp_path):
    env = dict(os.environ, KVBLK_CUDART=str(tmp_path / "no-such-libcudart.so"))
    code = _CHILD.format(tests=os.path.dirname(__file__))
    p = subprocess.run([sys.executable, "-c", code, store[0]], env=env, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0 and p.stdout.strip() == "ok", p.stdout + p.stderr
