# SPDX-License-Identifier: MIT
"""The numpy dtypes are the C structs, byte for byte."""

import numpy as np

import kvblk
from kvblk import _kvblk


def test_desc_dtype_is_struct_kvblk_desc():
    assert _kvblk.DESC_SIZE == 48
    assert kvblk.DESC_DTYPE.itemsize == 48
    expect = {"offset": 0, "length": 8, "addr": 16, "buf_id": 24, "flags": 28, "tag": 32,
              "target": 40, "reserved": 44}
    assert dict(_kvblk.DESC_OFFSETS) == expect
    assert {f: kvblk.DESC_DTYPE.fields[f][1] for f in expect} == expect


def test_result_and_cqe_dtypes():
    assert kvblk.RESULT_DTYPE.itemsize == _kvblk.RESULT_SIZE == 24
    assert {f: kvblk.RESULT_DTYPE.fields[f][1] for f in _kvblk.RESULT_OFFSETS} == dict(_kvblk.RESULT_OFFSETS)
    assert kvblk.CQE_DTYPE.itemsize == _kvblk.CQE_SIZE == 64
    assert {f: kvblk.CQE_DTYPE.fields[f][1] for f in _kvblk.CQE_OFFSETS} == dict(_kvblk.CQE_OFFSETS)


def test_desc_bytes_as_c_lays_them_out():
    d = kvblk.make_descs([4096], [8192], [0x1000], buf_id=7, tags=[99], target=3,
                         flags=kvblk.DESC_UNALIGNED)
    raw = np.frombuffer(d.tobytes(), dtype="<u8")
    assert raw[0] == 4096 and raw[1] == 8192 and raw[2] == 0x1000
    assert raw[3] == 7 | (kvblk.DESC_UNALIGNED << 32)  # buf_id, flags
    assert raw[4] == 99
    assert raw[5] == 3  # target, reserved 0


def test_make_descs_defaults():
    d = kvblk.make_descs(np.arange(3) * 4096, 4096, 0)
    assert list(d["tag"]) == [0, 1, 2]
    assert (d["buf_id"] == kvblk.BUF_NONE).all()
    assert (d["reserved"] == 0).all() and (d["target"] == 0).all()
    e = kvblk.empty_descs(2)
    assert (e["buf_id"] == kvblk.BUF_NONE).all() and (e["length"] == 0).all()


def test_aligned_empty():
    for align in (512, 4096, 1 << 16):
        a = kvblk.aligned_empty(12345, align)
        assert a.ctypes.data % align == 0 and a.nbytes == 12345
    a = kvblk.aligned_empty(4096, dtype=np.uint32)
    assert a.shape == (1024,)


def test_version():
    assert kvblk.__version__ == _kvblk.version()
    assert tuple(int(x) for x in kvblk.__version__.split(".")[:2]) >= (0, 3)


def test_extension_has_the_whole_api():
    """The suite runs against a libkvblk with the asynchronous API (kvblk_submit and friends)."""
    assert _kvblk.HAVE_ASYNC
