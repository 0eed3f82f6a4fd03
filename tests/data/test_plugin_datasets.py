"""Datasets a user brings: cifar100, torchvision classes by name, image folders, text files
and custom factories; partition natural; one registry for every dataset name."""

import os
import pathlib
import pickle
import textwrap

import numpy as np
import pytest
import torch
from PIL import Image

from fedjoule import rng
from fedjoule.data import federated, images, vision
from fedjoule.data.federated import build_federated_data, load_dataset
from fedjoule.data.images import load_image_folder, load_torchvision_class, per_class_split
from fedjoule.data.loaded import LoadedData
from fedjoule.data.partition import (
    local_test_indices,
    natural_groups,
    natural_partition,
    random_test_indices,
)
from fedjoule.data.shapes import DATASET_SHAPES, client_sample_counts, dataset_shape, input_dtype
from fedjoule.data.text import held_out_count, load_text, speeches
from fedjoule.errors import FedjouleError
from fedjoule.plugins import REGISTRY, Entry, PluginError, load_spec
from fedjoule.scenarios.schema import DATASET_NAMES, DatasetSection

DATA_DIR = os.environ.get("FEDJOULE_DATA_DIR")
needs_data = pytest.mark.skipif(not DATA_DIR, reason="FEDJOULE_DATA_DIR is not set")


def section(**fields) -> DatasetSection:
    return DatasetSection.model_validate(fields)


@pytest.fixture(autouse=True)
def fresh_caches(monkeypatch):
    """Loaders keep datasets in memory: each test starts without them."""
    monkeypatch.setattr(images, "_CACHE", type(images._CACHE)())
    from fedjoule.data import text

    monkeypatch.setattr(text, "_CACHE", type(text._CACHE)())
    monkeypatch.setattr(federated, "_FACTORY_RESULTS", type(federated._FACTORY_RESULTS)())


# --- the registry ----------------------------------------------------------------------


def test_every_dataset_name_is_a_registered_builtin():
    entries = REGISTRY.entries("dataset")
    assert set(DATASET_NAMES) <= set(entries)
    assert all(entries[name].origin == "built in" for name in DATASET_NAMES)
    assert entries["cifar100"].target is entries["mnist"].target  # one torchvision loader


def test_build_dispatches_through_the_registry(monkeypatch):
    x = torch.arange(24, dtype=torch.float32).reshape(12, 2)
    y = torch.arange(12) % 3

    def fake(sec, *, n_clients, seed, data_dir):
        return LoadedData(x, y, x[:6], y[:6])

    entries = REGISTRY.entries("dataset")
    monkeypatch.setitem(entries, "adult", Entry("dataset", "adult", fake, "built in"))
    data = build_federated_data(section(name="adult"), 4, seed=0)
    assert data.x_train is x and data.n_classes == 3
    assert data.client_samples.tolist() == [3, 3, 3, 3]
    assert sorted(np.concatenate(data.client_train).tolist()) == list(range(12))


# --- cifar100 --------------------------------------------------------------------------


def test_cifar100_shape_and_offline_error(tmp_path):
    assert dataset_shape(section(name="cifar100")) == ((3, 32, 32), 100)
    assert DATASET_SHAPES["cifar100"][2] == 50_000
    with pytest.raises(FedjouleError) as info:
        vision.load_vision("cifar100", tmp_path, download=False)
    message = str(info.value)
    assert "'cifar100'" in message and str(tmp_path) in message
    assert "cifar-100-python" in message and "FEDJOULE_DATA_DIR" in message


def write_fake_cifar100(root: pathlib.Path, n_train: int, n_test: int) -> tuple:
    """A torchvision-layout CIFAR-100 folder of random images (checksums not matching)."""
    gen = np.random.default_rng(5)
    folder = root / "cifar-100-python"
    folder.mkdir(parents=True)
    arrays = []
    for name, n in (("train", n_train), ("test", n_test)):
        data = gen.integers(0, 256, (n, 3072), dtype=np.uint8)
        labels = gen.integers(0, 100, n).tolist()
        with open(folder / name, "wb") as f:
            pickle.dump({"data": data, "fine_labels": labels}, f, protocol=4)
        arrays += [torch.from_numpy(data.reshape(n, 3, 32, 32)), torch.tensor(labels)]
    with open(folder / "meta", "wb") as f:
        pickle.dump({"fine_label_names": [f"class{i}" for i in range(100)]}, f, protocol=4)
    return tuple(arrays)


def test_cifar100_builtin_and_torchvision_class_read_the_same_images(tmp_path, monkeypatch):
    import torchvision

    monkeypatch.setattr(torchvision.datasets.CIFAR100, "_check_integrity", lambda self: True)
    monkeypatch.setattr(torchvision.datasets.cifar, "check_integrity", lambda *a: True)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(vision, "_CACHE", {})
    raw_x, raw_y, raw_xt, raw_yt = write_fake_cifar100(tmp_path / "data", 30, 12)

    x, y, xt, yt = vision.load_vision("cifar100", tmp_path / "data", download=False)
    mean = torch.tensor([0.5071, 0.4865, 0.4409]).view(1, 3, 1, 1)
    std = torch.tensor([0.2673, 0.2564, 0.2762]).view(1, 3, 1, 1)
    assert x.shape == (30, 3, 32, 32) and xt.shape == (12, 3, 32, 32)
    torch.testing.assert_close(x, (raw_x / 255.0 - mean) / std, rtol=0, atol=1e-6)
    torch.testing.assert_close(xt, (raw_xt / 255.0 - mean) / std, rtol=0, atol=1e-6)
    assert torch.equal(y, raw_y) and torch.equal(yt, raw_yt)

    generic = load_torchvision_class("CIFAR100", tmp_path / "data", download=False)
    train_mean = (raw_x / 255.0).double().mean(dim=(0, 2, 3)).view(1, 3, 1, 1)
    train_std = (raw_x / 255.0).double().std(dim=(0, 2, 3), correction=0).view(1, 3, 1, 1)
    for got, raw in ((generic.x_train, raw_x), (generic.x_test, raw_xt)):
        want = ((raw / 255.0).double() - train_mean) / train_std
        torch.testing.assert_close(got.double(), want, rtol=0, atol=1e-5)
    assert torch.equal(generic.y_train, raw_y) and torch.equal(generic.y_test, raw_yt)
    assert generic.n_classes == 100  # the dataset's class list, not the largest label + 1


# --- any torchvision class ---------------------------------------------------------------


@needs_data
def test_torchvision_mnist_equals_the_builtin_up_to_normalisation():
    root = pathlib.Path(DATA_DIR)
    x, y, xt, yt = vision.load_vision("mnist", root, download=False)
    s = section(name="torchvision", **{"class": "MNIST"})
    generic = load_dataset(s, 10, data_dir=root)
    pixels, pixels_test = x * 0.3081 + 0.1307, xt * 0.3081 + 0.1307  # back to [0, 1]
    mean = float(pixels.double().mean())
    std = float(pixels.double().std(correction=0))
    torch.testing.assert_close(generic.x_train, (pixels - mean) / std, rtol=0, atol=1e-5)
    torch.testing.assert_close(generic.x_test, (pixels_test - mean) / std, rtol=0, atol=1e-5)
    assert torch.equal(generic.y_train, y) and torch.equal(generic.y_test, yt)
    assert generic.y_train.dtype == torch.int64 and generic.n_classes == 10
    assert (
        abs(float(generic.x_train.mean())) < 1e-5 and abs(float(generic.x_train.std()) - 1) < 1e-5
    )
    # the class's own arrays were used: they agree with decoding samples one by one
    import torchvision

    dataset = torchvision.datasets.MNIST(root, train=True)
    for i in (1, 777, 31_000, 59_998):
        one = images.to_chw(dataset[i][0], None, "")
        assert torch.equal(one, (pixels[i] * 255).round().to(torch.uint8))
    assert dataset_shape(s, root) == ((1, 28, 28), 10)
    assert input_dtype(s, root) == torch.float32
    data = build_federated_data(s, 7, seed=3, data_dir=root)
    assert client_sample_counts(s, 7, 3, root).tolist() == data.client_samples.tolist()
    assert data.client_samples.tolist() == [60_000 // 7] * 7


FAKE = {"size": 60, "image_size": [3, 6, 5], "num_classes": 4}


def test_torchvision_fakedata_is_split_per_class():
    import torchvision
    from torchvision.transforms.functional import pil_to_tensor

    data = load_torchvision_class("FakeData", pathlib.Path("/nonexistent"), FAKE)
    fake = torchvision.datasets.FakeData(size=60, image_size=(3, 6, 5), num_classes=4)
    raw = torch.stack([pil_to_tensor(fake[i][0]) for i in range(60)])
    labels = torch.tensor([fake[i][1] for i in range(60)])
    train, test = per_class_split(labels.numpy())
    counts = np.bincount(labels.numpy(), minlength=4)
    assert len(test) == sum(int(np.floor(c / 5 + 0.5)) for c in counts)
    assert len(train) + len(test) == 60 and not set(train) & set(test)
    assert data.x_train.shape == (len(train), 3, 6, 5) and data.x_test.shape == (len(test), 3, 6, 5)
    assert torch.equal(data.y_train, labels[train]) and torch.equal(data.y_test, labels[test])
    pixels = raw[train].double() / 255
    mean = pixels.mean(dim=(0, 2, 3)).view(1, 3, 1, 1)
    std = pixels.std(dim=(0, 2, 3), correction=0).view(1, 3, 1, 1)
    torch.testing.assert_close(data.x_train.double(), (pixels - mean) / std, rtol=0, atol=1e-5)
    torch.testing.assert_close(
        data.x_test.double(), (raw[test].double() / 255 - mean) / std, rtol=0, atol=1e-5
    )
    assert data.n_classes == 4
    # through a scenario section, with the image resized
    s = section(name="torchvision", image_size=3, options=FAKE, **{"class": "FakeData"})
    assert dataset_shape(s) == ((3, 3, 3), 4)
    assert build_federated_data(s, 3, seed=0).x_test.shape == (len(test), 3, 3, 3)


def test_torchvision_unknown_class_and_bad_options():
    with pytest.raises(FedjouleError) as info:
        load_torchvision_class("CIFAR1000", pathlib.Path("/nonexistent"))
    assert "'CIFAR1000'" in str(info.value)
    assert "CIFAR100" in str(info.value) and "FakeData" in str(info.value)
    with pytest.raises(FedjouleError, match="unexpected keyword argument 'sizes'"):
        load_torchvision_class("FakeData", pathlib.Path("/nonexistent"), {"sizes": 3})
    with pytest.raises(FedjouleError, match="'download' is set by fedjoule"):
        load_torchvision_class("MNIST", pathlib.Path("/nonexistent"), {"download": True})


def test_torchvision_missing_files_offline_error(tmp_path):
    with pytest.raises(FedjouleError) as info:
        load_torchvision_class("SVHN", tmp_path / "none", download=False)
    message = str(info.value)
    assert "'SVHN'" in message and str(tmp_path / "none") in message
    assert "FEDJOULE_DATA_DIR" in message and "download" in message
    assert not (tmp_path / "none").exists()


# --- image folders -----------------------------------------------------------------------


def write_images(folder: pathlib.Path, per_class: dict[str, int], size=(4, 3), start=0):
    """PNG files <folder>/<class>/<k>.png whose pixels encode class, image and position;
    returns {path: uint8 (3, H, W) tensor}."""
    written = {}
    for c, (name, count) in enumerate(sorted(per_class.items())):
        (folder / name).mkdir(parents=True, exist_ok=True)
        for k in range(count):
            w, h = size
            pixels = (np.arange(h * w * 3).reshape(h, w, 3) * 7 + 40 * c + 3 * (k + start)) % 256
            path = folder / name / f"{k:02d}.png"
            Image.fromarray(pixels.astype(np.uint8), "RGB").save(path)
            written[path] = torch.from_numpy(pixels.astype(np.uint8)).permute(2, 0, 1)
    return written


def test_image_folder_split_per_class(tmp_path):
    written = write_images(tmp_path, {"cat": 5, "dog": 7, "eel": 3})
    data = load_image_folder(tmp_path)
    paths = sorted(written)  # ImageFolder order: class folders, then file names
    raw = torch.stack([written[p] for p in paths])
    labels = torch.tensor([0] * 5 + [1] * 7 + [2] * 3)
    train, test = per_class_split(labels.numpy())
    assert len(test) == 1 + 1 + 1  # round(5/5), round(7/5), round(3/5)
    assert data.x_train.shape == (12, 3, 3, 4) and data.x_test.shape == (3, 3, 3, 4)
    assert torch.equal(data.y_train, labels[train]) and torch.equal(data.y_test, labels[test])
    pixels = raw[train].double() / 255
    mean = pixels.mean(dim=(0, 2, 3)).view(1, 3, 1, 1)
    std = pixels.std(dim=(0, 2, 3), correction=0).view(1, 3, 1, 1)
    torch.testing.assert_close(data.x_train.double(), (pixels - mean) / std, rtol=0, atol=1e-5)
    torch.testing.assert_close(
        data.x_test.double(), (raw[test].double() / 255 - mean) / std, rtol=0, atol=1e-5
    )
    s = section(name="image-folder", root=str(tmp_path))
    assert dataset_shape(s) == ((3, 3, 4), 3) and input_dtype(s) == torch.float32
    built = build_federated_data(s, 4, seed=1)
    assert built.client_samples.tolist() == [3, 3, 3, 3]
    assert client_sample_counts(s, 4, 1).tolist() == [3, 3, 3, 3]


def test_image_folder_train_and_test_folders_and_resizing(tmp_path):
    write_images(tmp_path / "train", {"a": 2, "b": 3, "c": 2})
    test_files = write_images(tmp_path / "test", {"b": 2}, start=10)
    data = load_image_folder(tmp_path)
    assert data.x_train.shape == (7, 3, 3, 4) and data.y_train.tolist() == [0, 0, 1, 1, 1, 2, 2]
    assert data.y_test.tolist() == [1, 1] and data.n_classes == 3  # b is class 1 of train
    resized = load_image_folder(tmp_path, image_size=2)
    assert resized.x_train.shape == (7, 3, 2, 2) and resized.x_test.shape == (2, 3, 2, 2)
    first = sorted(test_files)[0]
    want = torch.from_numpy(
        np.array(Image.open(first).convert("RGB").resize((2, 2), Image.Resampling.BILINEAR))
    ).permute(2, 0, 1)
    train_pixels = torch.stack(
        [
            images.to_chw(Image.open(p).convert("RGB"), 2, "")
            for p in sorted((tmp_path / "train").rglob("*.png"))
        ]
    )
    mean, std = images.channel_statistics(train_pixels)
    expect = (want.double() / 255 - mean.view(3, 1, 1)) / std.view(3, 1, 1)
    torch.testing.assert_close(resized.x_test[0].double(), expect, rtol=0, atol=1e-5)


def test_image_folder_differing_sizes_name_two_files(tmp_path):
    write_images(tmp_path, {"a": 3})
    odd = write_images(tmp_path / "b_holder", {"b": 1}, size=(5, 5))
    (tmp_path / "b").mkdir()
    next(iter(odd)).rename(tmp_path / "b" / "odd.png")
    (tmp_path / "b_holder" / "b").rmdir()
    (tmp_path / "b_holder").rmdir()
    with pytest.raises(FedjouleError) as info:
        load_image_folder(tmp_path)
    message = str(info.value)
    assert str(tmp_path / "a" / "00.png") in message and str(tmp_path / "b" / "odd.png") in message
    assert "3x3x4" in message and "3x5x5" in message and "image_size" in message
    assert load_image_folder(tmp_path, image_size=4).x_train.shape[1:] == (3, 4, 4)


def test_image_folder_test_class_unknown_to_train(tmp_path):
    write_images(tmp_path / "train", {"a": 2})
    write_images(tmp_path / "test", {"z": 1})
    with pytest.raises(FedjouleError, match="test classes z have no folder"):
        load_image_folder(tmp_path)


# --- text ---------------------------------------------------------------------------------

PLAY = textwrap.dedent(
    """\
    THE TRAGEDY OF NOBODY, a header line left out
    ANNA:
    To be or not to be, that is the question we ask.
    BEN: Whether tis nobler in the mind to suffer the slings.
    ANNA:
    And arrows of outrageous fortune, or to take arms.

    ACT II. SCENE 1. A stage heading, left out
    Against a sea of troubles.
      CARL. And by opposing end them. To die, to sleep.
        No more; and by a sleep to say we end.
    BEN: The heartache.
    """
)


def test_speakers_of_a_play():
    got = speeches(PLAY)
    assert [name for name, _ in got] == ["ANNA", "BEN", "ANNA", "CARL", "BEN"]
    assert got[0][1] == "To be or not to be, that is the question we ask.\n"
    assert got[2][1] == "And arrows of outrageous fortune, or to take arms.\n\n"
    carl = "And by opposing end them. To die, to sleep.\n"
    assert got[3][1] == carl + "    No more; and by a sleep to say we end.\n"


def reference_windows(text: str, vocab: str, length: int):
    """x, y windows computed with string slicing, as a second path."""
    count = (len(text) - 1) // length
    xs = [[vocab.index(c) for c in text[k * length : k * length + length]] for k in range(count)]
    ys = [
        [vocab.index(c) for c in text[k * length + 1 : k * length + length + 1]]
        for k in range(count)
    ]
    return xs, ys


def test_text_windows_per_speaker(tmp_path):
    path = tmp_path / "play.txt"
    path.write_text(PLAY)
    data = load_text(path, 7, "speaker", 1)
    vocab = "".join(sorted(set(PLAY)))
    assert data.vocabulary == vocab and data.n_classes == len(vocab)
    assert data.group_names == ["ANNA", "BEN", "CARL"]
    texts = {}
    for name, speech in speeches(PLAY):
        texts[name] = texts.get(name, "") + speech
    x_train, y_train, x_test, y_test, ids, ids_test = [], [], [], [], [], []
    for group, name in enumerate(data.group_names):
        xs, ys = reference_windows(texts[name], vocab, 7)
        cut = len(xs) - held_out_count(len(xs))
        x_train += xs[:cut]
        y_train += ys[:cut]
        x_test += xs[cut:]
        y_test += ys[cut:]
        ids += [group] * cut
        ids_test += [group] * (len(xs) - cut)
    assert data.x_train.tolist() == x_train and data.y_train.tolist() == y_train
    assert data.x_test.tolist() == x_test and data.y_test.tolist() == y_test
    assert data.client_ids.tolist() == ids and data.client_ids_test.tolist() == ids_test
    assert data.x_train.dtype == data.y_train.dtype == torch.int64
    assert data.y_train.shape == (len(x_train), 7)
    assert torch.equal(data.x_train[:, 1:], data.y_train[:, :-1])  # y is x shifted by one


def test_text_natural_partition_and_shapes(tmp_path):
    path = tmp_path / "play.txt"
    path.write_text(PLAY)
    s = section(
        name="text", root=str(path), sequence_length=7, partition="natural", local_test_samples=2
    )
    loaded = load_dataset(s, 3)
    data = build_federated_data(s, 3, seed=4)
    assert data.y_train.shape[1:] == (7,) and data.input_shape == (7,)
    assert data.n_classes == len(set(PLAY))
    per_speaker = np.bincount(loaded.client_ids).tolist()
    assert data.client_samples.tolist() == per_speaker
    for k in range(3):
        assert (loaded.client_ids[data.client_train[k]] == k).all()
        own = np.flatnonzero(loaded.client_ids_test == k)
        if len(own) <= 2:
            assert data.client_test[k].tolist() == own.tolist()
        else:
            assert len(data.client_test[k]) == 2 and set(data.client_test[k]) <= set(own)
    assert dataset_shape(s) == ((7,), len(set(PLAY)))
    assert input_dtype(s) == torch.int64
    assert client_sample_counts(s, 3, 4).tolist() == per_speaker
    # two clients: the two speakers with most training windows, in speaker order
    two = build_federated_data(s, 2, seed=4)
    largest = sorted(np.argsort(-np.array(per_speaker), kind="stable")[:2].tolist())
    assert two.client_samples.tolist() == [per_speaker[g] for g in largest]
    with pytest.raises(FedjouleError) as info:
        build_federated_data(s, 4, seed=4)
    assert "3 natural clients" in str(info.value) and "population.size is 4" in str(info.value)
    assert "at most 3" in str(info.value)


def test_text_chunks_iid_and_label_skew(tmp_path):
    path = tmp_path / "prose.txt"
    text = "".join(chr(97 + (i * 7) % 26) for i in range(1000))
    path.write_text(text)
    s = section(
        name="text",
        root=str(path),
        sequence_length=10,
        text_clients="chunk",
        partition="natural",
        local_test_samples=5,
    )
    data = build_federated_data(s, 4, seed=0)
    # 4 chunks of 250 characters: 24 windows each, round(24/5) = 5 held out
    assert data.client_samples.tolist() == [19] * 4
    assert [len(t) for t in data.client_test] == [5] * 4
    assert data.x_train[0].tolist() == [ord(c) - 97 for c in text[:10]]
    assert data.x_train[19].tolist() == [ord(c) - 97 for c in text[250:260]]
    iid = build_federated_data(s.model_copy(update={"partition": "iid"}), 4, seed=0)
    assert iid.client_samples.tolist() == [19] * 4
    gen = rng.stream(0, "local_test")
    expect = random_test_indices(len(iid.y_test), 5, 4, gen)
    assert all(np.array_equal(a, b) for a, b in zip(iid.client_test, expect, strict=True))
    assert (
        client_sample_counts(s.model_copy(update={"partition": "iid"}), 4, 0).tolist() == [19] * 4
    )
    for skew in ("dirichlet", "shards"):
        with pytest.raises(FedjouleError, match=f"partition: {skew} skews the labels"):
            build_federated_data(s.model_copy(update={"partition": skew}), 4, seed=0)


def test_text_without_speakers_says_to_use_chunks(tmp_path):
    path = tmp_path / "prose.txt"
    path.write_text("just some prose, no one speaks here.\n" * 10)
    with pytest.raises(FedjouleError, match="text_clients: chunk"):
        load_text(path, 5, "speaker", 1)


# --- custom factories ----------------------------------------------------------------------

FACTORY = textwrap.dedent(
    """\
    import numpy as np
    import torch

    def as_dict(n=30, users=4, test_ids=True):
        gen = np.random.default_rng(1)
        out = {
            "x_train": gen.normal(size=(n, 2, 3)),
            "y_train": np.arange(n) % 3,
            "x_test": torch.ones(8, 2, 3, dtype=torch.float64),
            "y_test": torch.tensor([0, 1, 2, 0, 1, 2, 0, 1]),
            "client_ids": np.array([f"user{i % users}" for i in range(n)]),
            "n_classes": 5,
        }
        if test_ids:
            out["client_ids_test"] = np.array([f"user{i % 2}" for i in range(8)])
        return out

    def as_tuple():
        return np.ones((6, 4), np.float32), np.arange(6), np.zeros((3, 4)), np.array([0, 7, 1])

    CALLS = []

    def counted(n=12):
        CALLS.append(n)
        return np.ones((n, 2)), np.arange(n) % 2, np.ones((4, 2)), np.arange(4) % 2

    def tokens():
        x = np.arange(40).reshape(10, 4)
        return x, x + 1, x[:3], x[:3] + 1

    def broken(what):
        d = as_dict()
        if what == "float labels":
            d["y_train"] = d["y_train"].astype(float)
        elif what == "short labels":
            d["y_train"] = d["y_train"][:-1]
        elif what == "nan":
            d["x_train"][4, 1, 2] = float("nan")
        elif what == "missing":
            del d["x_test"]
        elif what == "list":
            d["x_train"] = [[1.0]] * 30
        elif what == "classes":
            d["n_classes"] = 2
        elif what == "ids":
            d["client_ids"] = d["client_ids"][:5]
        elif what == "raise":
            raise KeyError("no such table")
        return d
    """
)


@pytest.fixture
def factory_file(tmp_path):
    path = tmp_path / "my_data.py"
    path.write_text(FACTORY)
    return path


def test_custom_factory_dict_with_natural_clients(factory_file):
    s = section(
        name="custom", factory=f"{factory_file}:as_dict", partition="natural", local_test_samples=3
    )
    assert s.source.sha256 is not None
    data = build_federated_data(s, 4, seed=0)
    assert data.x_train.dtype == torch.float32 and data.x_train.shape == (30, 2, 3)
    assert data.n_classes == 5
    # users user0..user3 have 8, 8, 7, 7 samples: every one is a client, in id order
    assert data.client_samples.tolist() == [8, 8, 7, 7]
    assert data.client_train[1].tolist() == list(range(1, 30, 4))
    # own test samples: user0 has test rows 0, 2, 4, 6 (3 drawn), user1 1, 3, 5, 7
    assert len(data.client_test[0]) == 3 and set(data.client_test[0]) <= {0, 2, 4, 6}
    assert len(data.client_test[1]) == 3 and set(data.client_test[1]) <= {1, 3, 5, 7}
    # user2 and user3 have no test rows: the label-mix rule, from the same stream
    labels = data.y_train.numpy()
    gen = rng.stream(0, "local_test")
    for _ in range(2):  # the two own draws come first
        gen.choice(4, 3, replace=False)
    mix = local_test_indices(
        [labels[data.client_train[k]] for k in (2, 3)], data.y_test.numpy(), 3, 5, gen
    )
    assert data.client_test[2].tolist() == mix[0].tolist()
    assert data.client_test[3].tolist() == mix[1].tolist()
    assert client_sample_counts(s, 4, 0).tolist() == [8, 8, 7, 7]
    assert dataset_shape(s) == ((2, 3), 5) and input_dtype(s) == torch.float32
    few = section(
        name="custom", factory=f"{factory_file}:as_dict", partition="natural", options={"users": 2}
    )
    with pytest.raises(FedjouleError, match="has 2 natural clients but population.size is 4"):
        build_federated_data(few, 4, seed=0)


def test_custom_factory_natural_without_test_ids_uses_label_mix(factory_file):
    s = section(
        name="custom",
        factory=f"{factory_file}:as_dict",
        partition="natural",
        options={"test_ids": False},
        local_test_samples=4,
    )
    data = build_federated_data(s, 3, seed=2)
    # 4 users of 8, 8, 7, 7: the three largest, ties to the smaller id
    assert data.client_samples.tolist() == [8, 8, 7]
    labels = data.y_train.numpy()
    expect = local_test_indices(
        [labels[i] for i in data.client_train],
        data.y_test.numpy(),
        4,
        5,
        rng.stream(2, "local_test"),
    )
    assert all(np.array_equal(a, b) for a, b in zip(data.client_test, expect, strict=True))


def test_custom_factory_tuple_and_token_inputs(factory_file):
    s = section(name="custom", factory=f"{factory_file}:as_tuple")
    data = build_federated_data(s, 2, seed=0)
    assert data.n_classes == 8  # largest label (7, in the test set) + 1
    assert data.client_samples.tolist() == [3, 3]
    t = section(name="custom", factory=f"{factory_file}:tokens")
    assert input_dtype(t) == torch.int64 and dataset_shape(t) == ((4,), 41)
    tokens = build_federated_data(t, 2, seed=0)
    assert tokens.y_train.shape == (10, 4) and tokens.x_train.dtype == torch.int64
    assert all(len(i) == 200 for i in tokens.client_test)  # random draws for sequences
    with pytest.raises(FedjouleError, match="dirichlet skews the labels"):
        build_federated_data(t.model_copy(update={"partition": "dirichlet"}), 2, seed=0)


@pytest.mark.parametrize(
    ("what", "message"),
    [
        ("float labels", "y_train is float64; labels must be integer class ids"),
        ("short labels", "y_train has 29 labels but x_train has 30 samples"),
        ("nan", "x_train has 1 values that are NaN or infinite \\(first in sample 4\\)"),
        ("missing", "misses x_test"),
        ("list", "x_train is a list; give a numpy array or a torch tensor"),
        ("classes", "n_classes is 2 but the labels go up to 2"),
        ("ids", "client_ids has 5 ids for 30 samples"),
    ],
)
def test_custom_factory_problems_name_spec_and_key(factory_file, what, message):
    spec = f"{factory_file}:broken"
    s = section(name="custom", factory=spec, options={"what": what})
    with pytest.raises(FedjouleError, match=message) as info:
        build_federated_data(s, 2, seed=0)
    assert f"dataset factory {spec!r}" in str(info.value)


def test_custom_factory_is_called_once_for_shapes_and_run(factory_file):
    s = section(name="custom", factory=f"{factory_file}:counted", options={"n": 12})
    assert dataset_shape(s) == ((2,), 2) and input_dtype(s) == torch.float32
    assert client_sample_counts(s, 3, 0).tolist() == [4, 4, 4]
    assert build_federated_data(s, 3, seed=0).client_samples.tolist() == [4, 4, 4]
    calls = load_spec(f"{factory_file}:CALLS")[0]
    assert calls == [12]
    build_federated_data(s.model_copy(update={"options": {"n": 15}}), 3, seed=0)
    assert calls == [12, 15]


def test_custom_factory_failure_is_a_plugin_error(factory_file):
    spec = f"{factory_file}:broken"
    s = section(name="custom", factory=spec, options={"what": "raise"})
    with pytest.raises(PluginError) as info:
        build_federated_data(s, 2, seed=0)
    assert spec in str(info.value) and "KeyError" in str(info.value)


# --- natural partitions --------------------------------------------------------------------


def test_natural_groups_take_the_largest_in_id_order():
    ids = np.array([5, 3, 5, 9, 3, 5, 1, 9, 3, 7])  # sizes: 1:1, 3:3, 5:3, 7:1, 9:2
    assert natural_groups(ids, 5).tolist() == [1, 3, 5, 7, 9]
    assert natural_groups(ids, 3).tolist() == [3, 5, 9]
    assert natural_groups(ids, 4).tolist() == [1, 3, 5, 9]  # tie 1 vs 7: the smaller id
    parts = natural_partition(ids, np.array([3, 9]))
    assert [p.tolist() for p in parts] == [[1, 4, 8], [3, 7]]
    with pytest.raises(FedjouleError, match="has 5 natural clients but population.size is 6"):
        natural_groups(ids, 6)


def test_random_test_indices_with_and_without_replacement():
    gen = np.random.default_rng(0)
    small = random_test_indices(10, 4, 3, gen)
    assert all(len(i) == 4 and len(set(i.tolist())) == 4 for i in small)
    big = random_test_indices(3, 5, 2, gen)
    assert all(len(i) == 5 and set(i.tolist()) == {0, 1, 2} for i in big)
