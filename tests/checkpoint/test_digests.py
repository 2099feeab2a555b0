"""A checkpoint's seal: the sha256 of its large files is remembered between processes, but never
trusted for a file that changed (checked against hashlib reading the bytes)."""

import hashlib
import json
import os

from netlist2tf.checkpoint import emit


def test_a_remembered_digest_follows_every_change(tmp_path, monkeypatch):
    monkeypatch.setenv("NETLIST2TF_BUILD_DIR", str(tmp_path / "build"))
    f = tmp_path / "model.safetensors"
    data = bytearray(os.urandom(emit.REMEMBERED + 5))
    f.write_bytes(data)
    assert emit.file_digest(f) == hashlib.sha256(data).hexdigest()
    known = json.loads((tmp_path / "build" / emit.DIGESTS).read_text())
    assert [v[-1] for v in known.values()] == [hashlib.sha256(data).hexdigest()]
    assert emit.file_digest(f) == hashlib.sha256(data).hexdigest()        # remembered
    # one byte changed in place, the size and the modification time put back: still seen
    st = f.stat()
    data[12345] ^= 1
    with open(f, "r+b") as h:
        h.seek(12345)
        h.write(bytes([data[12345]]))
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert emit.file_digest(f) == hashlib.sha256(data).hexdigest()
    # a small file is never remembered
    small = tmp_path / "config.json"
    small.write_text("{}")
    assert emit.file_digest(small) == hashlib.sha256(b"{}").hexdigest()
    assert len(json.loads((tmp_path / "build" / emit.DIGESTS).read_text())) == 1


def test_a_build_folder_that_cannot_be_made_only_costs_a_hash(tmp_path, monkeypatch):
    (tmp_path / "a-file").write_text("not a folder")
    monkeypatch.setenv("NETLIST2TF_BUILD_DIR", str(tmp_path / "a-file" / "build"))
    f = tmp_path / "w.bin"
    data = os.urandom(emit.REMEMBERED)
    f.write_bytes(data)
    assert emit.file_digest(f) == hashlib.sha256(data).hexdigest()
    assert emit.file_digest(f) == hashlib.sha256(data).hexdigest()
