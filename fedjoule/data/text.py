"""A plain text file as a character-level next-character dataset (LEAF Shakespeare style).

The vocabulary is the sorted set of the file's characters (after universal-newline
reading: \\r\\n and \\r become \\n); a character's id is its rank in it. The text is cut
into groups (speakers, or equal chunks of the file); each group's ids into
non-overlapping windows of T + 1 characters (stride T): x = the first T ids, y = the
next T (x shifted by one). The last 20 % of each group's windows (round(n/5) of n) are
its test windows; the rest its training windows.
"""

import pathlib
import re
from collections import OrderedDict

import numpy as np
import torch

from fedjoule.data.loaded import LoadedData
from fedjoule.datafile import read_data_text
from fedjoule.errors import FedjouleError

TEST_FRACTION = 0.2

# "NAME: speech" or "NAME:" (then the speech on the following lines): a name of at most
# four words of letters, digits, apostrophes, periods and hyphens, each capitalised but
# for a few joining words (so that "Thus it is:" in a speech is no speaker).
_COLON = re.compile(r"^\s*([A-Za-z][A-Za-z0-9'.\-]*(?: [A-Za-z0-9'.\-]+){0,3})\s*:(?:\s|$)")
# A play's speaker line: an upper-case name alone ("HAMLET", "FIRST CITIZEN.") or an
# upper-case name, a period and the speech ("  HAMLET. To be, or not to be").
_UPPER_ALONE = re.compile(r"^\s*([A-Z][A-Z'\-]*(?: [A-Z][A-Z'\-]*){0,3})\s*[.:]?\s*$")
_UPPER_DOT = re.compile(r"^\s*([A-Z][A-Z'\-]*(?: [A-Z][A-Z'\-]*){0,3})\. +\S")
# Headings that end a speech and are not speakers; their text up to the next speaker is
# left out (stage headings, scene settings).
_HEADING = re.compile(r"^(ACT|SCENE|PROLOGUE|EPILOGUE|INDUCTION|THE END|DRAMATIS PERSONAE)\b")
_ROMAN = re.compile(r"^[IVXLC]+$")
_JOINING = {"of", "the", "de", "la", "le", "du", "van", "von", "and"}

_CACHE: "OrderedDict[tuple, LoadedData]" = OrderedDict()
_CACHE_SIZE = 4


def read_text(path: str | pathlib.Path) -> str:
    text = read_data_text(path, "dataset.root", "dataset")
    if len(text) < 2:
        raise FedjouleError(f"dataset.root: {path} holds {len(text)} characters; too few")
    return text


def vocabulary(text: str) -> str:
    """The sorted distinct characters of the text; a character's id is its position."""
    return "".join(sorted(set(text)))


def encode(text: str, vocab: str) -> np.ndarray:
    """int64 ids of the text's characters (every one must be in vocab)."""
    points = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
    table = np.frombuffer(vocab.encode("utf-32-le"), dtype=np.uint32)
    return np.searchsorted(table, points).astype(np.int64)


def _speaker(line: str) -> tuple[str, str] | None:
    """(speaker, speech on this line) when the line starts a speech; None otherwise."""
    for pattern in (_UPPER_DOT, _COLON, _UPPER_ALONE):
        match = pattern.match(line)
        if match is None:
            continue
        name = " ".join(match.group(1).rstrip(".").split())
        if sum(c.isalpha() for c in name) < 2 or _ROMAN.match(name) or _HEADING.match(name):
            return None
        if pattern is _COLON and not _capitalised(name):
            return None
        if pattern is _UPPER_ALONE:
            return name.upper(), ""
        speech_start = match.end(0) - (1 if pattern is _UPPER_DOT else 0)
        return name.upper(), line[speech_start:].lstrip(" \t")
    return None


def _capitalised(name: str) -> bool:
    words = name.split()
    return words[0][0].isupper() and all(w[0].isupper() or w in _JOINING for w in words[1:])


def speeches(text: str) -> list[tuple[str, str]]:
    """(speaker, speech) pairs in file order. A speech starts at a speaker line (see the
    module's patterns: 'NAME: text', 'NAME:', an upper-case 'NAME' or 'NAME.' line, or
    'NAME. text') and runs to the next speaker line or heading (ACT, SCENE, ...); the
    speaker label is left out, the characters of the speech (line ends included) kept.
    Lines before the first speaker and after a heading are left out."""
    result: list[tuple[str, list[str]]] = []
    current: list[str] | None = None
    for line in text.splitlines(keepends=True):
        if _HEADING.match(line.strip()):
            current = None
            continue
        found = _speaker(line)
        if found is not None:
            name, rest = found
            current = [rest] if rest else []
            result.append((name, current))
        elif current is not None:
            current.append(line)
    return [(name, "".join(parts)) for name, parts in result if "".join(parts)]


def groups_of(text: str, text_clients: str, n_chunks: int, path) -> tuple[list[str], list[str]]:
    """(group names, group texts): one per speaker (speeches joined in file order, names in
    order of first appearance) or n_chunks equal chunks of the file (the last
    len(text) mod n_chunks characters left out)."""
    if text_clients == "chunk":
        size = len(text) // n_chunks
        if size < 2:
            raise FedjouleError(
                f"dataset.root: {path} has {len(text)} characters, too few for "
                f"{n_chunks} chunks (population.size) of at least 2"
            )
        return [f"chunk {k}" for k in range(n_chunks)], [
            text[k * size : (k + 1) * size] for k in range(n_chunks)
        ]
    by_speaker: dict[str, list[str]] = {}
    for name, speech in speeches(text):
        by_speaker.setdefault(name, []).append(speech)
    if not by_speaker:
        raise FedjouleError(
            f"dataset.root: {path} has no speaker lines ('NAME: text', or a play's "
            "upper-case 'NAME' line followed by the speech); use text_clients: chunk to cut "
            "the file into population.size equal parts"
        )
    return list(by_speaker), ["".join(parts) for parts in by_speaker.values()]


def windows(ids: np.ndarray, length: int) -> tuple[np.ndarray, np.ndarray]:
    """(x, y) of the non-overlapping windows of length + 1 ids, stride length: x the first
    `length` ids of a window, y the next `length`."""
    count = max((len(ids) - 1) // length, 0)
    starts = np.arange(count, dtype=np.int64)[:, None] * length
    offsets = np.arange(length, dtype=np.int64)[None, :]
    return ids[starts + offsets], ids[starts + offsets + 1]


def held_out_count(n: int, fraction: float = TEST_FRACTION) -> int:
    """Held-out windows of a group of n: round(fraction n), halves up."""
    return int(np.floor(fraction * n + 0.5))


def load_text(
    path: str | pathlib.Path, sequence_length: int, text_clients: str, n_clients: int
) -> LoadedData:
    """The text file as next-character windows (int64, (n, T)), with each window's group
    (speaker or chunk, numbered in order) as its natural client id."""
    path = pathlib.Path(path).expanduser()
    info = path.stat() if path.is_file() else None
    if info is None:
        raise FedjouleError(f"dataset.root: {path} is not a file (text needs a plain text file)")
    chunks = n_clients if text_clients == "chunk" else 0
    key = (
        str(path.resolve()),
        info.st_size,
        info.st_mtime_ns,
        sequence_length,
        text_clients,
        chunks,
    )
    if key in _CACHE:
        _CACHE.move_to_end(key)
        return _CACHE[key]
    text = read_text(path)
    vocab = vocabulary(text)
    names, texts = groups_of(text, text_clients, chunks, path)
    parts: dict[str, list[np.ndarray]] = {k: [] for k in ("x", "y", "xt", "yt", "id", "idt")}
    for group, group_text in enumerate(texts):
        x, y = windows(encode(group_text, vocab), sequence_length)
        cut = len(x) - held_out_count(len(x))
        for name, value in (("x", x[:cut]), ("y", y[:cut]), ("xt", x[cut:]), ("yt", y[cut:])):
            parts[name].append(value)
        parts["id"].append(np.full(cut, group, dtype=np.int64))
        parts["idt"].append(np.full(len(x) - cut, group, dtype=np.int64))
    joined = {k: np.concatenate(v) for k, v in parts.items()}
    what = "speakers" if text_clients == "speaker" else "chunks"
    for split, key_x in (("training", "x"), ("test", "xt")):
        if len(joined[key_x]) == 0:
            raise FedjouleError(
                f"dataset.root: {path} gives no {split} windows: its {len(names)} {what} are "
                f"too short for windows of sequence_length + 1 = {sequence_length + 1} "
                "characters (a group needs 3 windows to hold one out for testing); use a "
                "smaller sequence_length, fewer chunks or a longer text"
            )
    data = LoadedData(
        torch.from_numpy(joined["x"]),
        torch.from_numpy(joined["y"]),
        torch.from_numpy(joined["xt"]),
        torch.from_numpy(joined["yt"]),
        n_classes=len(vocab),
        client_ids=joined["id"],
        client_ids_test=joined["idt"],
        vocabulary=vocab,
        group_names=names,
    )
    _CACHE[key] = data
    while len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return data
