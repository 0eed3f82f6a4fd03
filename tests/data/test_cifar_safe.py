"""CIFAR-10 / CIFAR-100 are read without unpickling: the same tensors as torchvision's
loader, and a batch file that names any other global is refused, never run."""

import io
import os
import pathlib
import pickle
import pickletools
import struct

import numpy as np
import pytest
import torch

from fedjoule.data import cifar, images, vision
from fedjoule.data.images import load_torchvision_class, torchvision_class
from fedjoule.errors import FedjouleError

torchvision = pytest.importorskip("torchvision")


# --- files written the way the real ones are --------------------------------------------


class Py2Pickler(pickle._Pickler):
    """Writes what Python 2's cPickle wrote at protocol 2, as in the CIFAR archives: text
    and bytes as Python 2 strings (SHORT_BINSTRING / BINSTRING, so bytes keys), numpy's
    array reconstruction named numpy.core.multiarray._reconstruct."""

    dispatch = pickle._Pickler.dispatch.copy()

    def save_py2_string(self, obj):
        raw = obj.encode("latin-1") if isinstance(obj, str) else bytes(obj)
        if len(raw) < 256:
            self.write(pickle.SHORT_BINSTRING + bytes([len(raw)]) + raw)
        else:
            self.write(pickle.BINSTRING + struct.pack("<i", len(raw)) + raw)
        self.memoize(obj)

    dispatch[str] = save_py2_string
    dispatch[bytes] = save_py2_string

    def save_global(self, obj, name=None):
        if getattr(obj, "__module__", None) == "numpy._core.multiarray":  # numpy 2's name
            self.write(pickle.GLOBAL + b"numpy.core.multiarray\n" + obj.__name__.encode() + b"\n")
            self.memoize(obj)
            return
        super().save_global(obj, name)


def dump_py2(content: dict) -> bytes:
    buffer = io.BytesIO()
    Py2Pickler(buffer, 2).dump(content)
    return buffer.getvalue()


def dump_py3_protocol2(content: dict) -> bytes:
    """The same dict re-pickled by Python 3 at protocol 2: bytes keys and strings (which
    Python 3 writes as _codecs.encode(text, "latin1"))."""

    def as_bytes(value):
        if isinstance(value, str):
            return value.encode("latin-1")
        if isinstance(value, list):
            return [as_bytes(v) for v in value]
        return value

    return pickle.dumps({k.encode(): as_bytes(v) for k, v in content.items()}, protocol=2)


WRITERS = {"py2": dump_py2, "py3-protocol2": dump_py3_protocol2}


def write_cifar(root: pathlib.Path, name: str, writer: str = "py2", seed: int = 3) -> dict:
    """A torchvision-layout folder of random images with the real files' names and keys
    (checksums not matching); returns {file: (uint8 (n, 3072), labels)}."""
    dump = WRITERS[writer]
    gen = np.random.default_rng(seed)
    written = {}
    if name == "cifar10":
        folder = root / "cifar-10-batches-py"
        batches = [(f"data_batch_{i}", 4 + i) for i in range(1, 6)] + [("test_batch", 7)]
        classes, label_keys = 10, ("labels",)
        meta = ("batches.meta", {"label_names": [f"c{i}" for i in range(10)], "num_vis": 3072})
    else:
        folder = root / "cifar-100-python"
        batches = [("train", 23), ("test", 9)]
        classes, label_keys = 100, ("fine_labels", "coarse_labels")
        meta = (
            "meta",
            {
                "fine_label_names": [f"fine{i}" for i in range(100)],
                "coarse_label_names": [f"coarse{i}" for i in range(20)],
            },
        )
    folder.mkdir(parents=True)
    for file, n in batches:
        data = gen.integers(0, 256, (n, 3072), dtype=np.uint8)
        content = {"data": data, "batch_label": f"{file} of the fake set"}
        for key in label_keys:
            content[key] = gen.integers(0, classes if key != "coarse_labels" else 20, n).tolist()
        content["filenames"] = [f"img_{file}_{i}.png" for i in range(n)]
        (folder / file).write_bytes(dump(content))
        written[file] = (data, content[label_keys[0]])
    (folder / meta[0]).write_bytes(dump(meta[1]))
    return written


@pytest.fixture
def isolated(tmp_path, monkeypatch):
    """Empty in-memory caches and the tensor cache under tmp_path."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(vision, "_CACHE", {})
    monkeypatch.setattr(images, "_CACHE", type(images._CACHE)())
    return tmp_path


@pytest.fixture
def lenient(isolated, monkeypatch):
    """`isolated`, and torchvision's checksum checks passing: its own loader then reads
    the fake files (and would unpickle a hostile one)."""
    monkeypatch.setattr(torchvision.datasets.CIFAR10, "_check_integrity", lambda self: True)
    monkeypatch.setattr(torchvision.datasets.cifar, "check_integrity", lambda *a: True)
    return isolated


def torchvision_open(name, root, train, download):
    """vision._open as it was: torchvision's own CIFAR classes (pickle.load)."""
    cls = torchvision.datasets.CIFAR10 if name == "cifar10" else torchvision.datasets.CIFAR100
    return cls(root, train=train, download=download)


def globals_named(payload: bytes) -> set[str]:
    """The globals a pickle names (GLOBAL opcodes; the files have no STACK_GLOBAL)."""
    ops = list(pickletools.genops(payload))
    assert not any(op.name == "STACK_GLOBAL" for op, _, _ in ops)
    return {arg.replace(" ", ".") for op, arg, _ in ops if op.name in ("GLOBAL", "INST")}


# --- the format ------------------------------------------------------------------------


def test_the_real_format_names_only_numpys_array_globals():
    content = {"data": np.zeros((2, 3072), np.uint8), "labels": [1, 2], "batch_label": "b"}
    content["filenames"] = ["a.png", "b.png"]
    real = dump_py2(content)
    assert real[:2] == b"\x80\x02" and b"U\x04data" in real  # protocol 2, a Python 2 str key
    assert globals_named(real) == {
        "numpy.core.multiarray._reconstruct",
        "numpy.ndarray",
        "numpy.dtype",
    }
    # Python 3 at protocol 2 adds _codecs.encode for bytes (and numpy 2 its module name)
    numpy_module = np.zeros(1).__reduce__()[0].__module__  # numpy._core.multiarray in 2.x
    assert globals_named(dump_py3_protocol2(content)) == {
        "_codecs.encode",
        f"{numpy_module}._reconstruct",
        "numpy.ndarray",
        "numpy.dtype",
    }
    assert {f"{m}.{n}" for m, n in cifar.ALLOWED_GLOBALS} == {
        "numpy.core.multiarray._reconstruct",
        "numpy._core.multiarray._reconstruct",
        "numpy.ndarray",
        "numpy.dtype",
        "_codecs.encode",
    }


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_read_batch_gives_the_written_arrays_and_labels(tmp_path, writer):
    written = write_cifar(tmp_path, "cifar100", writer)
    for file, (data, labels) in written.items():
        got_data, got_labels = cifar.read_batch(tmp_path / "cifar-100-python" / file)
        assert got_data.dtype == np.uint8 and np.array_equal(got_data, data)
        assert got_labels == labels
    classes = cifar.read_classes(tmp_path / "cifar-100-python" / "meta", "fine_label_names")
    assert classes == [f"fine{i}" for i in range(100)]


@pytest.mark.parametrize("name", ["cifar10", "cifar100"])
def test_safe_class_equals_torchvisions_loader(lenient, name):
    root = lenient / "data"
    write_cifar(root, name)
    tv_name = {"cifar10": "CIFAR10", "cifar100": "CIFAR100"}[name]
    for train in (True, False):
        theirs = getattr(torchvision.datasets, tv_name)(root, train=train)
        ours = getattr(cifar, tv_name)(root, train=train)
        assert isinstance(ours, getattr(torchvision.datasets, tv_name))
        assert ours.data.dtype == np.uint8 and ours.data.shape == theirs.data.shape
        assert np.array_equal(ours.data, theirs.data)
        assert ours.targets == theirs.targets and ours.classes == theirs.classes
        assert ours.class_to_idx == theirs.class_to_idx and len(ours) == len(theirs)
        for i in (0, len(ours) - 1):
            (a, la), (b, lb) = ours[i], theirs[i]
            assert la == lb and np.array_equal(np.asarray(a), np.asarray(b))
        x, y = cifar.read_cifar(root, name, train)
        assert x.dtype == torch.uint8 and x.shape == (len(theirs), 3, 32, 32)
        assert torch.equal(x, torch.from_numpy(theirs.data).permute(0, 3, 1, 2))
        assert y.dtype == torch.int64 and y.tolist() == theirs.targets


@pytest.mark.parametrize("name", ["cifar10", "cifar100"])
def test_builtin_tensors_equal_those_via_torchvision(lenient, monkeypatch, name):
    root = lenient / "data"
    write_cifar(root, name)
    with monkeypatch.context() as m:  # the loader as it was, with torchvision's pickle.load
        m.setattr(vision, "_open", torchvision_open)
        m.setenv("FEDJOULE_TENSOR_CACHE", "0")
        before = vision.load_vision(name, root, download=False)
    vision._CACHE.clear()
    now = vision.load_vision(name, root, download=False)  # decodes, writes the tensor cache
    vision._CACHE.clear()
    cached = vision.load_vision(name, root, download=False)  # from the tensor cache
    assert vision.tensor_cache_path(name, root).exists()
    for got in (now, cached):
        for a, b in zip(got, before, strict=True):
            assert a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    assert now[0].dtype == torch.float32 and now[1].dtype == torch.int64


@pytest.mark.parametrize("name", ["cifar10", "cifar100"])
def test_torchvision_class_tensors_equal_those_via_torchvision(lenient, monkeypatch, name):
    root = lenient / "data"
    write_cifar(root, name, "py3-protocol2")
    tv_name = {"cifar10": "CIFAR10", "cifar100": "CIFAR100"}[name]
    with monkeypatch.context() as m:
        m.setattr(images, "safe_class", lambda cls: cls)  # torchvision's own classes
        m.setattr(torchvision.datasets.cifar.pickle, "load", _bytes_keys_as_text(pickle.load))
        before = load_torchvision_class(tv_name, root, download=False)
    images._CACHE.clear()
    now = load_torchvision_class(tv_name, root, download=False)
    for field in ("x_train", "y_train", "x_test", "y_test"):
        assert torch.equal(getattr(now, field), getattr(before, field)), field
    assert now.n_classes == before.n_classes == (10 if name == "cifar10" else 100)
    resized = load_torchvision_class(tv_name, root, image_size=16, download=False)
    assert resized.x_train.shape[1:] == (3, 16, 16)  # samples decoded one by one (PIL)


def _bytes_keys_as_text(load):
    """torchvision's pickle.load for files with bytes keys (it looks up str keys)."""

    def loading(f, **kwargs):
        content = load(f, **kwargs)
        text = cifar._text
        return {
            text(k): [text(x) for x in v] if isinstance(v, list) else v for k, v in content.items()
        }

    return loading


# --- offline errors as before ----------------------------------------------------------


@pytest.mark.parametrize("name", ["cifar10", "cifar100"])
@pytest.mark.parametrize("remove", [None, "meta"])
def test_missing_files_give_the_same_offline_error(isolated, monkeypatch, name, remove):
    root = isolated / "data"
    root.mkdir()
    if remove == "meta":  # batches there (torchvision told they are the real ones), meta not
        monkeypatch.setattr(torchvision.datasets.CIFAR10, "_check_integrity", lambda self: True)
        write_cifar(root, name)
        folder = root / vision._LAYOUT[name].split("/")[0]
        (folder / ("batches.meta" if name == "cifar10" else "meta")).unlink()
    with monkeypatch.context() as m:
        m.setattr(vision, "_open", torchvision_open)
        with pytest.raises(FedjouleError) as theirs:
            vision.load_vision(name, root, download=False)
    with pytest.raises(FedjouleError) as ours:
        vision.load_vision(name, root, download=False)
    assert str(ours.value) == str(theirs.value)
    expected = cifar.META_NOT_FOUND if remove else cifar.NOT_FOUND
    assert expected in str(ours.value) and "FEDJOULE_DATA_DIR" in str(ours.value)
    tv_name = {"cifar10": "CIFAR10", "cifar100": "CIFAR100"}[name]
    with pytest.raises(FedjouleError) as generic:
        load_torchvision_class(tv_name, root, download=False)
    assert expected in str(generic.value) and f"torchvision.datasets.{tv_name}" in str(
        generic.value
    )


# --- hostile files -----------------------------------------------------------------------


class RunsCommand:
    def __init__(self, command: str):
        self.command = command

    def __reduce__(self):
        return (os.system, (self.command,))


def hostile_payloads(marker: pathlib.Path) -> dict[str, tuple[bytes, str]]:
    """name: (file content, the global the refusal names, or "~" and what the error says
    when no global is refused but a stand-in or the format check says no)."""
    command = f"touch {marker}"
    system = f"{os.system.__module__}.system"  # posix.system
    good = {"data": np.zeros((2, 3072), np.uint8), "labels": [0, 1]}
    return {
        "whole file": (pickle.dumps(RunsCommand(command), protocol=2), system),
        "in the labels": (dump_py2({**good, "labels": RunsCommand(command)}), system),
        "python 2 eval": (
            b"\x80\x02c__builtin__\neval\nq\x00U\x10__import__('os')q\x01\x85R.",
            "__builtin__.eval",
        ),
        "protocol 4": (pickle.dumps({"data": RunsCommand(command)}, protocol=4), system),
        "objects array": (
            dump_py2({**good, "data": np.array([1, "x"], dtype=object)}),
            "~it asks for an array of Python objects, which a CIFAR batch never does",
        ),
        "ndarray called": (
            b"\x80\x02cnumpy\nndarray\nK\x05\x85R.",
            "~it asks to call numpy.ndarray itself",
        ),
        "truncated": (dump_py2(good)[:-40], "~not a CIFAR python-version file"),
        "not a pickle": (b"\x00\x01 this is not a CIFAR batch", "~not a CIFAR python-version"),
    }


def test_the_hostile_payload_would_run(tmp_path):
    """The payload is live: plain pickle.load runs the command (what torchvision does)."""
    marker = tmp_path / "ran"
    pickle.loads(hostile_payloads(marker)["whole file"][0])
    assert marker.exists()


@pytest.mark.parametrize("case", list(hostile_payloads(pathlib.Path("m"))))
def test_hostile_batch_is_refused_and_not_run(tmp_path, case):
    marker = tmp_path / "ran"
    content, expected = hostile_payloads(marker)[case]
    path = tmp_path / "data_batch_1"
    path.write_bytes(content)
    with pytest.raises(FedjouleError) as info:
        cifar.read_batch(path)
    message = str(info.value)
    assert str(path) in message
    if expected.startswith("~"):
        assert expected[1:] in message
    else:
        assert message == (
            f"refusing to load {path}: it asks to run {expected}, which a CIFAR batch never does"
        )
    assert not marker.exists()


@pytest.mark.parametrize("name", ["cifar10", "cifar100"])
@pytest.mark.parametrize("hostile", ["batch", "meta"])
@pytest.mark.parametrize("route", ["builtin", "torchvision class"])
def test_both_routes_refuse_a_hostile_file(lenient, name, hostile, route):
    """Even with torchvision's checksum checks passing (so its pickle.load would run it)."""
    root = lenient / "data"
    write_cifar(root, name)
    folder = root / vision._LAYOUT[name].split("/")[0]
    file = {
        ("cifar10", "batch"): "data_batch_3",
        ("cifar10", "meta"): "batches.meta",
        ("cifar100", "batch"): "test",
        ("cifar100", "meta"): "meta",
    }[name, hostile]
    marker = lenient / "ran"
    (folder / file).write_bytes(pickle.dumps(RunsCommand(f"touch {marker}"), protocol=2))
    tv_name = {"cifar10": "CIFAR10", "cifar100": "CIFAR100"}[name]
    with pytest.raises(FedjouleError) as info:
        if route == "builtin":
            vision.load_vision(name, root, download=True)  # refused: no download is tried
        else:
            load_torchvision_class(tv_name, root, download=True)
    message = str(info.value)
    assert message.startswith(f"refusing to load {folder / file}: ")
    assert f"it asks to run {os.system.__module__}.system" in message
    assert not marker.exists()


@pytest.mark.parametrize("name", ["cifar10", "cifar100"])
def test_both_routes_never_call_torchvisions_pickle_load(lenient, monkeypatch, name):
    def forbidden(*args, **kwargs):
        raise AssertionError("torchvision's pickle.load was called")

    monkeypatch.setattr(torchvision.datasets.cifar.pickle, "load", forbidden)  # = pickle.load
    root = lenient / "data"
    write_cifar(root, name)
    tv_name = {"cifar10": "CIFAR10", "cifar100": "CIFAR100"}[name]
    assert torchvision_class(tv_name) is getattr(cifar, tv_name)
    assert issubclass(torchvision_class(tv_name), getattr(torchvision.datasets, tv_name))
    assert cifar.safe_class(torchvision.datasets.SVHN) is torchvision.datasets.SVHN
    x, y, xt, yt = vision.load_vision(name, root, download=False)
    assert x.shape[1:] == (3, 32, 32) and len(y) == len(x) and len(yt) == len(xt)
    generic = load_torchvision_class(tv_name, root, download=False)
    assert torch.equal(generic.y_train, y) and torch.equal(generic.y_test, yt)
