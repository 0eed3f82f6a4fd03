"""UCI Adult (census income) as one-hot, standardised tensors."""

import csv
import io
import pathlib

import numpy as np
import torch

from fedjoule.datafile import read_data_text
from fedjoule.errors import FedjouleError

# Column order of adult.data / adult.test (adult.names); the 15th column is the label.
ADULT_COLUMNS = [
    "age", "workclass", "fnlwgt", "education", "education-num", "marital-status",
    "occupation", "relationship", "race", "sex", "capital-gain", "capital-loss",
    "hours-per-week", "native-country",
]
ADULT_NUMERIC = ["age", "fnlwgt", "education-num", "capital-gain", "capital-loss", "hours-per-week"]
ADULT_URL = "https://archive.ics.uci.edu/dataset/2/adult"


def _read_rows(path: pathlib.Path) -> list[list[str]]:
    """Complete rows (15 fields, no '?') of one Adult file; skips the test file's junk line."""
    if not path.is_file():
        raise FedjouleError(
            f"UCI Adult file {path} not found. Download adult.data and adult.test from "
            f"{ADULT_URL} into {path.parent}, or point FEDJOULE_DATA_DIR / --data-dir at a "
            f"folder holding adult/adult.data and adult/adult.test."
        )
    rows = []
    text = read_data_text(path, "UCI Adult file", "dataset")
    try:
        table = list(csv.reader(io.StringIO(text, newline=""), skipinitialspace=True))
    except csv.Error as exc:
        raise FedjouleError(f"UCI Adult file {path}: not a readable CSV ({exc})") from None
    for row in table:
        fields = [v.strip() for v in row]
        if len(fields) != len(ADULT_COLUMNS) + 1 or "?" in fields:
            continue  # blank line, the '|1x3 Cross validator' header, or missing values
        rows.append(fields)
    if not rows:
        raise FedjouleError(f"UCI Adult file {path} holds no usable rows; re-download it from "
                            f"{ADULT_URL}.")
    return rows


def load_adult(root: pathlib.Path) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(x_train, y_train, x_test, y_test) from <root>/adult/adult.{data,test}.

    Rows with missing values ('?') are dropped; categorical columns are one-hot over the
    categories seen in train and test (same width); numeric columns are standardised with
    the training mean/std; y = 1 for '>50K'. x is float32, y int64.
    """
    folder = pathlib.Path(root).expanduser() / "adult"
    train_rows = _read_rows(folder / "adult.data")
    test_rows = _read_rows(folder / "adult.test")

    numeric = [ADULT_COLUMNS.index(c) for c in ADULT_NUMERIC]
    categorical = [j for j in range(len(ADULT_COLUMNS)) if j not in numeric]
    categories = {j: sorted({r[j] for r in train_rows + test_rows}) for j in categorical}

    def encode(rows: list[list[str]]) -> tuple[np.ndarray, np.ndarray]:
        num = np.array([[float(r[j]) for j in numeric] for r in rows], dtype=np.float64)
        blocks = [num]
        for j in categorical:
            lookup = {v: k for k, v in enumerate(categories[j])}
            codes = np.array([lookup[r[j]] for r in rows])
            blocks.append(np.eye(len(lookup))[codes])
        y = np.array([1 if r[-1].rstrip(".") == ">50K" else 0 for r in rows], dtype=np.int64)
        return np.concatenate(blocks, axis=1), y

    x_train, y_train = encode(train_rows)
    x_test, y_test = encode(test_rows)
    k = len(numeric)  # numeric columns come first
    mean = x_train[:, :k].mean(axis=0)
    std = x_train[:, :k].std(axis=0)
    std[std == 0] = 1.0
    x_train[:, :k] = (x_train[:, :k] - mean) / std
    x_test[:, :k] = (x_test[:, :k] - mean) / std
    return (
        torch.from_numpy(x_train.astype(np.float32)),
        torch.from_numpy(y_train),
        torch.from_numpy(x_test.astype(np.float32)),
        torch.from_numpy(y_test),
    )
