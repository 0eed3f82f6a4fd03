"""fedjoule/datafile.py: a data file a user names is a regular file within its kind's
size, or one FedjouleError naming the field and the file (issue 26, item 4)."""

import os

import pytest

from fedjoule import datafile
from fedjoule.datafile import read_data_file, read_data_text
from fedjoule.errors import FedjouleError
from fedjoule.simulator.checkpoint import read_checkpoint


def test_only_a_regular_file_is_read(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "zero").symlink_to("/dev/zero")
    (tmp_path / "folder").mkdir()
    for name, what in [
        ("fifo", "a FIFO (named pipe)"),
        ("zero", "a character device"),
        ("folder", "a folder"),
        ("missing", "cannot be read (No such file or directory)"),
    ]:
        with pytest.raises(FedjouleError) as err:
            read_data_file(tmp_path / name, "model.weights", "weights")
        assert str(err.value).startswith(f"model.weights {tmp_path / name}: {what}")
    with pytest.raises(FedjouleError, match="a FIFO"):  # --resume of a planted FIFO
        read_checkpoint(tmp_path / "fifo")


def test_size_limit_and_text(tmp_path, monkeypatch):
    path = tmp_path / "t.csv"
    path.write_bytes(b"\xef\xbb\xbfa,b\n1,2\n")
    assert read_data_text(path, "f", "trace") == "a,b\n1,2\n"  # the BOM dropped
    monkeypatch.setitem(datafile.MAX_BYTES, "trace", 5)
    with pytest.raises(FedjouleError, match="t.csv: 11 bytes, larger than the 5 bytes allowed"):
        read_data_file(path, "f", "trace")
    path.write_bytes(b"ok\n\xff")
    with pytest.raises(FedjouleError, match=r"not UTF-8 text \(byte 0xff on line 2\)"):
        read_data_text(path, "f", "dataset")
