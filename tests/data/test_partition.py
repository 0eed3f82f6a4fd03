"""Client sizes, IID/Dirichlet/shard partitions and per-client local test sets."""


import numpy as np
import pytest

from fedjoule.data.partition import (
    client_sizes,
    dirichlet_partition,
    iid_partition,
    local_test_indices,
    shards_partition,
)
from fedjoule.errors import FedjouleError


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def mnist_like_labels(n: int = 60000, n_classes: int = 10) -> np.ndarray:
    return rng(123).integers(0, n_classes, n)


def test_equal_sizes_drop_remainder():
    sizes = client_sizes(1003, 10, "equal", rng())
    assert sizes.tolist() == [100] * 10


def test_lognormal_sigma_zero_is_equal():
    sizes = client_sizes(60000, 100, "lognormal", rng(), sigma=0.0)
    assert sizes.tolist() == [600] * 100


def test_lognormal_sums_exactly_and_spreads():
    sizes = client_sizes(60000, 100, "lognormal", rng(1), sigma=0.3)
    assert sizes.sum() == 60000
    assert sizes.min() >= 1
    # spread of log sizes is about sigma
    assert 0.2 < np.std(np.log(sizes)) < 0.4


def test_lognormal_min_size_enforced():
    sizes = client_sizes(2000, 50, "lognormal", rng(2), sigma=2.0, min_size=20)
    assert sizes.min() >= 20
    assert sizes.sum() == 2000


def test_zipf_sizes_follow_rank_law():
    s = 1.2
    sizes = client_sizes(60000, 100, "zipf", rng(3), zipf_s=s)
    assert sizes.sum() == 60000
    ranked = np.sort(sizes)[::-1]
    assert np.all(np.diff(ranked) <= 0)
    # rank r has floor(n r^-s / H); rank 1 also holds the rounding remainder (< N)
    h = np.sum(np.arange(1, 101) ** -s)
    expected = np.floor(60000 * np.arange(1, 101) ** -s / h)
    assert np.array_equal(ranked[1:], expected[1:])
    assert 0 <= ranked[0] - expected[0] < 100
    assert ranked[0] / ranked[1] == pytest.approx(2**s, rel=0.02)
    # the ranks are a random permutation: the largest client is not always client 0
    firsts = {int(np.argmax(client_sizes(60000, 100, "zipf", rng(k)))) for k in range(5)}
    assert len(firsts) > 1


def test_zipf_min_size_taken_from_largest():
    sizes = client_sizes(1000, 100, "zipf", rng(4), zipf_s=2.0, min_size=5)
    assert sizes.min() >= 5
    assert sizes.sum() == 1000


def test_size_errors():
    with pytest.raises(FedjouleError, match="valid kinds: equal, lognormal, zipf"):
        client_sizes(100, 10, "pareto", rng())
    with pytest.raises(FedjouleError, match="100"):
        client_sizes(100, 10, "equal", rng(), min_size=11)


def test_iid_partition_blocks():
    sizes = np.array([5, 10, 0, 20])
    parts = iid_partition(50, sizes, rng())
    assert [len(p) for p in parts] == [5, 10, 0, 20]
    used = np.concatenate(parts)
    assert len(np.unique(used)) == 35
    assert used.min() >= 0 and used.max() < 50
    with pytest.raises(FedjouleError):
        iid_partition(30, sizes, rng())


def check_exact(parts: list[np.ndarray], sizes: np.ndarray, n: int) -> None:
    assert [len(p) for p in parts] == sizes.tolist()
    used = np.concatenate(parts)
    assert len(np.unique(used)) == len(used) == sizes.sum()
    assert used.min() >= 0 and used.max() < n


def max_class_fraction(parts: list[np.ndarray], labels: np.ndarray, top: int = 1) -> float:
    fractions = []
    for p in parts:
        counts = np.sort(np.bincount(labels[p], minlength=10))[::-1]
        fractions.append(counts[:top].sum() / len(p))
    return float(np.mean(fractions))


@pytest.mark.timeout(60)  # a hang guard: it takes well under a second
def test_dirichlet_exact():
    labels = mnist_like_labels()
    sizes = client_sizes(60000, 100, "lognormal", rng(5), sigma=0.3)
    parts = dirichlet_partition(labels, sizes, 0.3, rng(6))
    check_exact(parts, sizes, 60000)  # uses all 60000 samples exactly once


def test_dirichlet_large_concentration_is_near_global():
    labels = mnist_like_labels()
    sizes = client_sizes(60000, 100, "equal", rng())
    parts = dirichlet_partition(labels, sizes, 1000.0, rng(7))
    check_exact(parts, sizes, 60000)
    global_p = np.bincount(labels, minlength=10) / len(labels)
    tv = [0.5 * np.abs(np.bincount(labels[p], minlength=10) / len(p) - global_p).sum()
          for p in parts]
    # 600 multinomial draws over 10 classes give total variation ~0.05
    assert np.mean(tv) < 0.08
    assert max_class_fraction(parts, labels) < 0.16


def test_dirichlet_small_concentration_is_skewed():
    labels = mnist_like_labels()
    sizes = client_sizes(60000, 100, "equal", rng())
    parts = dirichlet_partition(labels, sizes, 0.05, rng(8))
    check_exact(parts, sizes, 60000)
    assert max_class_fraction(parts, labels) > 0.6
    assert max_class_fraction(parts, labels, top=2) > 0.8


def test_dirichlet_follows_prior_when_classes_are_plentiful():
    labels = np.repeat(np.arange(10), 1000)
    sizes = np.full(40, 50)
    parts = dirichlet_partition(labels, sizes, 0.01, rng(9))
    check_exact(parts, sizes, 10000)
    # no class runs out, and Dir(0.01) priors are mostly near one-hot
    nearly_pure = [np.bincount(labels[p]).max() >= 0.9 * len(p) for p in parts]
    assert np.mean(nearly_pure) > 0.6
    assert max_class_fraction(parts, labels) > 0.85


def test_dirichlet_partial_use_and_errors():
    labels = np.repeat(np.arange(3), 10)
    sizes = np.array([7, 7, 7])
    parts = dirichlet_partition(labels, sizes, 0.5, rng(10))
    check_exact(parts, sizes, 30)
    with pytest.raises(FedjouleError):
        dirichlet_partition(labels, np.array([20, 20]), 0.5, rng())
    with pytest.raises(FedjouleError):
        dirichlet_partition(labels, sizes, 0.0, rng())


def test_dirichlet_is_seeded():
    labels = mnist_like_labels(5000)
    sizes = client_sizes(5000, 20, "equal", rng())
    a = dirichlet_partition(labels, sizes, 0.3, rng(11))
    b = dirichlet_partition(labels, sizes, 0.3, rng(11))
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))


def test_shards_two_classes_each():
    labels = np.repeat(np.arange(10), 600)[rng().permutation(6000)]
    parts = shards_partition(labels, 100, 2, rng(12))
    check_exact(parts, np.full(100, 60), 6000)
    n_classes = [len(np.unique(labels[p])) for p in parts]
    assert max(n_classes) <= 2


def test_local_test_indices_follow_train_proportions():
    test_labels = np.repeat(np.arange(10), 1000)[rng(13).permutation(10000)]
    client_train = [
        np.array([0] * 30 + [1] * 70),
        np.array([3] * 5),
        np.repeat(np.arange(10), 9),
    ]
    local = local_test_indices(client_train, test_labels, 200, 10, rng(14))
    counts = [np.bincount(test_labels[idx], minlength=10) for idx in local]
    assert counts[0].tolist() == [60, 140] + [0] * 8
    assert counts[1].tolist() == [0, 0, 0, 200] + [0] * 6
    assert counts[2].tolist() == [20] * 10
    for idx in local:
        assert len(idx) == 200 and len(np.unique(idx)) == 200  # without replacement


def test_local_test_indices_replacement_when_class_is_short():
    test_labels = np.array([0] * 5 + [1] * 100)
    local = local_test_indices([np.array([0, 0, 1, 1])], test_labels, 40, 2, rng(15))[0]
    counts = np.bincount(test_labels[local], minlength=2)
    assert counts.tolist() == [20, 20]
    assert set(local[test_labels[local] == 0]) == set(range(5))  # all 5 used, then repeats
