"""Client dataset sizes and label partitions of one pooled dataset."""

import numpy as np

from fedjoule.errors import FedjouleError

SIZE_KINDS = ("equal", "lognormal", "zipf")


def _take_from_largest(sizes: np.ndarray, min_size: int) -> np.ndarray:
    """Raise every size to min_size, taking the samples from the largest clients."""
    sizes = sizes.copy()
    for i in np.flatnonzero(sizes < min_size):
        need = min_size - int(sizes[i])
        sizes[i] = min_size
        while need > 0:
            j = int(np.argmax(sizes))
            take = min(need, int(sizes[j]) - min_size)
            sizes[j] -= take
            need -= take
    return sizes


def client_sizes(
    n_total: int,
    n_clients: int,
    kind: str,
    rng: np.random.Generator,
    sigma: float = 0.3,
    zipf_s: float = 1.2,
    min_size: int = 1,
) -> np.ndarray:
    """Per-client sample counts (int64, sum <= n_total, each >= min_size).

    equal: floor(n/N) each, remainder dropped (FedDyn/FedDC). lognormal: FedDyn/FedDC's
    unbalanced sizes, sums to n_total. zipf: exponent zipf_s over a random rank order, sums
    to n_total. Formulas: docs/datasets.md#client-sizes.
    """
    if kind not in SIZE_KINDS:
        valid = ", ".join(SIZE_KINDS)
        raise FedjouleError(f"unknown client size kind {kind!r}; valid kinds: {valid}")
    if n_clients < 1 or min_size < 0:
        raise FedjouleError(f"need n_clients >= 1 and min_size >= 0; got {n_clients}, {min_size}")
    if n_clients * min_size > n_total:
        raise FedjouleError(
            f"{n_clients} clients with at least {min_size} samples each need "
            f"{n_clients * min_size} samples but the dataset has {n_total}; use fewer clients "
            f"or a smaller minimum size"
        )
    if kind == "equal":
        return np.full(n_clients, n_total // n_clients, dtype=np.int64)
    if kind == "lognormal":
        if sigma < 0:
            raise FedjouleError(f"lognormal size spread sigma must be >= 0; got {sigma}")
        # FedDyn/FedDC unbalanced sizes (docs/datasets.md#client-sizes)
        raw = rng.lognormal(np.log(n_total / n_clients), sigma, n_clients)
        # tiny tolerance so sigma = 0 gives exactly n/N despite rounding in the sum
        sizes = np.floor(n_total * raw / raw.sum() + 1e-9).astype(np.int64)
        diff = int(sizes.sum()) - n_total
        if diff != 0:
            first = int(np.argmax(sizes > diff))  # first client whose size exceeds diff
            sizes[first] -= diff
    else:
        if zipf_s < 0:
            raise FedjouleError(f"zipf exponent must be >= 0; got {zipf_s}")
        # Zipf sizes over a random rank permutation (docs/datasets.md#client-sizes)
        rank = rng.permutation(n_clients) + 1  # rank of client i
        weight = rank.astype(np.float64) ** -zipf_s
        sizes = np.floor(n_total * weight / weight.sum()).astype(np.int64)
        sizes[rank == 1] += n_total - int(sizes.sum())  # rounding remainder to rank 1
    return _take_from_largest(sizes, min_size)


def _check_sizes(n_total: int, sizes: np.ndarray) -> np.ndarray:
    sizes = np.asarray(sizes, dtype=np.int64)
    if sizes.ndim != 1 or len(sizes) == 0 or (sizes < 0).any():  # at least one client
        raise FedjouleError(f"client sizes must be a 1-d array of counts >= 0; got {sizes}")
    if int(sizes.sum()) > n_total:
        raise FedjouleError(
            f"client sizes sum to {int(sizes.sum())} but the dataset has only {n_total} samples"
        )
    return sizes


def iid_partition(n_total: int, sizes: np.ndarray, rng: np.random.Generator) -> list[np.ndarray]:
    """IID partition: shuffle the indices, then contiguous blocks of the given sizes."""
    sizes = _check_sizes(n_total, sizes)
    order = rng.permutation(n_total)
    return np.split(order[: int(sizes.sum())], np.cumsum(sizes)[:-1])


def _running_count(values: np.ndarray, n_values: int) -> np.ndarray:
    """For each position t, how many times values[t] occurs in values[: t + 1]."""
    order = np.argsort(values, kind="stable")
    counts = np.bincount(values, minlength=n_values)
    starts = np.cumsum(counts) - counts
    occurrence = np.empty(len(values), dtype=np.int64)
    occurrence[order] = np.arange(len(values)) - starts[values[order]] + 1
    return occurrence


def dirichlet_partition(
    labels: np.ndarray, sizes: np.ndarray, concentration: float, rng: np.random.Generator
) -> list[np.ndarray]:
    """Dirichlet label-skew partition with exact client sizes (FedDyn/FedDC DatasetObject;
    docs/datasets.md#dirichlet-label-skew).

    Shuffle; give each client a class prior q_i ~ Dir(concentration * 1_C); until all quotas
    are filled, pick a client uniformly among those with quota left, draw a class from q_i
    (redrawing while the class is exhausted) and give it the next unused sample of that class.

    Redrawing until an available class comes up is the same as drawing from q_i restricted to
    the available classes, which is what is done here (no endless loop when q_i puts all its
    mass on exhausted classes; if that mass is exactly 0 in floating point, the class is drawn
    in proportion to the samples left). Steps are simulated in vectorised chunks: between two
    events (a client filling up, a class running out) the draws are i.i.d., so a chunk is kept
    up to its first event and the rest is redrawn under the new state.
    """
    labels = np.asarray(labels)
    if labels.ndim != 1 or len(labels) == 0 or labels.min() < 0:
        raise FedjouleError("labels must be a non-empty 1-d array of class ids >= 0")
    if not concentration > 0:
        raise FedjouleError(f"Dirichlet concentration must be > 0; got {concentration}")
    sizes = _check_sizes(len(labels), sizes)
    labels = labels.astype(np.int64)
    n_clients, n_classes = len(sizes), int(labels.max()) + 1

    order = rng.permutation(len(labels))  # shuffle (step 1)
    by_class = order[np.argsort(labels[order], kind="stable")]  # class blocks, shuffled within
    class_left = np.bincount(labels, minlength=n_classes)
    class_next = np.cumsum(class_left) - class_left  # next unused position in by_class
    priors = rng.dirichlet(np.full(n_classes, float(concentration)), size=n_clients)
    client_left = sizes.copy()

    got_client = [np.zeros(0, dtype=np.int64)]
    got_sample = [np.zeros(0, dtype=np.int64)]
    while client_left.sum() > 0:
        active = np.flatnonzero(client_left > 0)
        available = class_left > 0
        weights = priors[active] * available
        empty = weights.sum(axis=1) <= 0
        weights[empty] = class_left  # q_i has no mass left on available classes
        cum = np.cumsum(weights, axis=1)
        # chunk length: about the expected steps to the next client fill, bounded
        m = int(client_left[active].min()) * len(active)
        m = int(min(max(m, 64), int(client_left.sum()), 1 << 15))
        row = rng.integers(len(active), size=m)
        u = 1.0 - rng.random(m)  # in (0, 1], so a zero-weight class is never drawn
        cls = (cum[row] < (u * cum[row, -1])[:, None]).sum(axis=1)
        client = active[row]
        event = (_running_count(client, n_clients) == client_left[client]) | (
            _running_count(cls, n_classes) == class_left[cls]
        )
        keep = int(np.argmax(event)) + 1 if event.any() else m
        client, cls = client[:keep], cls[:keep]
        position = class_next[cls] + _running_count(cls, n_classes) - 1
        got_client.append(client)
        got_sample.append(by_class[position])
        used_client = np.bincount(client, minlength=n_clients)
        used_class = np.bincount(cls, minlength=n_classes)
        client_left -= used_client
        class_left -= used_class
        class_next += used_class

    all_client = np.concatenate(got_client)
    all_sample = np.concatenate(got_sample)
    grouped = np.argsort(all_client, kind="stable")  # keeps each client's assignment order
    return np.split(all_sample[grouped], np.cumsum(sizes)[:-1])


def shards_partition(
    labels: np.ndarray, n_clients: int, shards_per_client: int, rng: np.random.Generator
) -> list[np.ndarray]:
    """McMahan et al.'s pathological non-IID split: sort by label, cut equal shards, deal
    shards_per_client random shards to each client (remainder samples dropped)."""
    labels = np.asarray(labels)
    n_shards = n_clients * shards_per_client
    shard_size = len(labels) // max(n_shards, 1)
    if n_clients < 1 or shards_per_client < 1 or shard_size < 1:
        raise FedjouleError(
            f"cannot cut {len(labels)} samples into {n_clients} x {shards_per_client} shards; "
            f"use fewer clients or shards"
        )
    order = rng.permutation(len(labels))
    by_label = order[np.argsort(labels[order], kind="stable")]
    shards = by_label[: n_shards * shard_size].reshape(n_shards, shard_size)
    dealt = rng.permutation(n_shards).reshape(n_clients, shards_per_client)
    return [shards[d].reshape(-1) for d in dealt]


def _largest_remainder(p: np.ndarray, n: int) -> np.ndarray:
    """Integer counts summing to n, proportional to p (largest-remainder rounding)."""
    exact = p * n
    counts = np.floor(exact).astype(np.int64)
    short = n - int(counts.sum())
    counts[np.argsort(-(exact - counts), kind="stable")[:short]] += 1
    return counts


def local_test_indices(
    client_train_labels: list[np.ndarray],
    test_labels: np.ndarray,
    n_per_client: int,
    n_classes: int,
    rng: np.random.Generator,
) -> list[np.ndarray]:
    """Per client, n_per_client indices into the shared test set whose class counts follow
    the client's training class proportions (largest-remainder rounding).

    Test samples of a class are drawn without replacement while the class has enough of
    them, with replacement beyond that. Classes absent from the test set are left out and
    the proportions renormalised; a client without training labels gets the test set's
    own class proportions. Returned indices are sorted.
    """
    test_labels = np.asarray(test_labels, dtype=np.int64)
    if n_per_client < 1:
        raise FedjouleError(f"local test size must be >= 1; got {n_per_client}")
    if len(test_labels) == 0 or test_labels.min() < 0 or test_labels.max() >= n_classes:
        raise FedjouleError(f"test labels must be non-empty class ids in [0, {n_classes})")
    test_by_class = [np.flatnonzero(test_labels == c) for c in range(n_classes)]
    present = np.array([len(t) > 0 for t in test_by_class])
    test_counts = np.bincount(test_labels, minlength=n_classes).astype(np.float64)

    result = []
    for train in client_train_labels:
        train = np.asarray(train, dtype=np.int64)
        if len(train) and (train.min() < 0 or train.max() >= n_classes):
            raise FedjouleError(f"client training labels must be class ids in [0, {n_classes})")
        counts = np.bincount(train, minlength=n_classes).astype(np.float64) * present
        if counts.sum() == 0:  # no training labels, or only classes the test set lacks
            counts = test_counts
        wanted = _largest_remainder(counts / counts.sum(), n_per_client)
        picks = []
        for c in np.flatnonzero(wanted):
            pool, k = test_by_class[c], int(wanted[c])
            if k <= len(pool):
                picks.append(rng.choice(pool, k, replace=False))
            else:
                picks.append(rng.permutation(pool))
                picks.append(rng.choice(pool, k - len(pool), replace=True))
        result.append(np.sort(np.concatenate(picks)))
    return result


def natural_groups(ids: np.ndarray, n_clients: int, what: str = "the dataset") -> np.ndarray:
    """The group ids that become clients 0 .. n_clients - 1 under partition natural: the
    n_clients groups with the most samples (ties: the smaller id), in increasing id order.
    FedjouleError when there are fewer groups than clients."""
    ids = np.asarray(ids)
    values, counts = np.unique(ids, return_counts=True)
    if len(values) < n_clients:
        raise FedjouleError(
            f"partition natural: {what} has {len(values)} natural clients but "
            f"population.size is {n_clients}; set population.size to at most {len(values)} "
            "(or use partition iid to split the pooled samples among more clients)"
        )
    largest = np.argsort(-counts, kind="stable")[:n_clients]  # np.unique sorted the ids
    return values[np.sort(largest)]


def natural_partition(ids: np.ndarray, groups: np.ndarray) -> list[np.ndarray]:
    """For each group, the indices (increasing) of the samples with that id."""
    ids = np.asarray(ids)
    order = np.argsort(ids, kind="stable")
    sorted_ids = ids[order]
    starts = np.searchsorted(sorted_ids, groups, side="left")
    ends = np.searchsorted(sorted_ids, groups, side="right")
    return [order[a:b] for a, b in zip(starts, ends, strict=True)]


def random_test_indices(
    n_test: int, n_per_client: int, n_clients: int, rng: np.random.Generator
) -> list[np.ndarray]:
    """Per client, n_per_client indices (sorted) drawn from range(n_test): without
    replacement while the test set has enough, the rest with replacement (labels that
    are not one class per sample, so no label mix to follow)."""
    if n_per_client < 1 or n_test < 1:
        raise FedjouleError(
            f"local test size and test set must be >= 1; got {n_per_client}, {n_test}"
        )
    result = []
    for _ in range(n_clients):
        if n_per_client <= n_test:
            picks = rng.choice(n_test, n_per_client, replace=False)
        else:
            extra = rng.choice(n_test, n_per_client - n_test, replace=True)
            picks = np.concatenate([rng.permutation(n_test), extra])
        result.append(np.sort(picks))
    return result


def own_test_indices(
    test_ids: np.ndarray, groups: np.ndarray, n_per_client: int, rng: np.random.Generator
) -> list[np.ndarray | None]:
    """Per client (group), its own test samples: all of them when it has at most
    n_per_client, else n_per_client of them drawn without replacement (sorted); None for
    a client without test samples."""
    result: list[np.ndarray | None] = []
    for rows in natural_partition(test_ids, groups):
        if len(rows) == 0:
            result.append(None)
        elif len(rows) <= n_per_client:
            result.append(rows)
        else:
            result.append(np.sort(rng.choice(rows, n_per_client, replace=False)))
    return result
