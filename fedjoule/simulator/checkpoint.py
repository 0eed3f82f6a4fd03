"""Checkpoints that hold only data and know which run they belong to.

A checkpoint is a `torch.save` of plain containers (dicts, lists, strings, numbers,
None) and tensors, read back with `torch.load(weights_only=True)`, which constructs
nothing else: a file carrying a pickled object or call is refused, never run. Besides
the simulation's state it binds itself to its run: the checkpoint format, the fedjoule
version, the resolved scenario (and its SHA-256), the round, and the length and CRC-32
of every appended file (rounds.csv, events.jsonl) and of the client-state file. Resuming
checks all of them and names the file and what differs.
"""

import hashlib
import json
import math
import pickle
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fedjoule import __version__
from fedjoule.datafile import open_data_file
from fedjoule.errors import FedjouleError
from fedjoule.folders import CHECKPOINT
from fedjoule.plugins import file_sha256
from fedjoule.scenarios import reader
from fedjoule.storage import replace_atomically
from fedjoule.torch_import import load_torch

FORMAT = "fedjoule-checkpoint/4"  # 3: running statistics (batch norm); 4: radio states
NAME = CHECKPOINT


@dataclass
class Progress:
    """What a run has accumulated; saved in every checkpoint."""

    next_round: int = 0
    sim_time_s: float = 0.0
    wall_time_s: float = 0.0
    cumulative_energy_j: float = 0.0
    metrics: dict = field(default_factory=dict)  # last evaluation
    best_accuracy: float = math.nan
    rounds_to_target: int | None = None
    energy_to_target_j: float | None = None
    time_to_target_s: float | None = None
    # the sum over rounds of the slowest arrived client's computation (rounds.csv
    # max_compute_time_s), and that sum when the target was reached (the TACO paper's metric)
    compute_time_s: float = 0.0
    compute_time_to_target_s: float | None = None
    diverged_at_round: int | None = None  # the round whose model or loss became NaN/inf
    diverged_reason: str | None = None
    end_of_run_tail_energy_j: float | None = None  # the tails running at the end (None: not yet)


def scenario_sha256(scenario_data: dict) -> str:
    """SHA-256 of a resolved scenario (its JSON form, keys sorted)."""
    text = json.dumps(scenario_data, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def plain(value: Any) -> Any:
    """`value` with numpy arrays as tensors and numpy scalars as Python numbers, so that
    `torch.load(weights_only=True)` can read it back."""
    torch = load_torch()
    numpy = sys.modules.get("numpy")  # (a numpy value exists only once numpy is loaded)
    if numpy is not None and isinstance(value, numpy.ndarray):
        return torch.from_numpy(numpy.ascontiguousarray(value))
    if numpy is not None and isinstance(value, numpy.generic):
        return value.item()
    if torch.is_tensor(value):
        return value.detach().cpu()
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(plain(v) for v in value)
    return value


def as_numpy(value):
    """A checkpoint's plain data with its tensors (the saved numpy arrays) as numpy arrays."""
    if hasattr(value, "numpy"):
        return value.numpy().copy()
    if isinstance(value, dict):
        return {k: as_numpy(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(as_numpy(v) for v in value)
    return value


def save_checkpoint(
    path: Path,
    simulation: dict,
    scenario_data: dict,
    next_round: int,
    files: dict,
    scenario_file_sha256: str | None = None,
) -> None:
    """Write the checkpoint atomically (temporary file, fsync, rename, folder fsync).
    `scenario_file_sha256`: of the run folder's scenario.yaml as written, checked on
    resume before the file is read (check_scenario_file)."""
    torch = load_torch()
    payload = {
        "format": FORMAT,
        "fedjoule_version": __version__,
        "scenario": scenario_data,
        "scenario_sha256": scenario_sha256(scenario_data),
        "scenario_file_sha256": scenario_file_sha256,
        "round": next_round,
        "files": files,
        "simulation": plain(simulation),
    }
    replace_atomically(Path(path), lambda f: torch.save(payload, f))


def read_checkpoint(path: Path, mmap: bool = False) -> dict:
    """A checkpoint's content, loaded as data only; anything else is a FedjouleError.
    `mmap`: tensors are mapped from the file, not read (to look at a checkpoint, e.g. a
    sweep restart checking its runs)."""
    torch = load_torch()
    path = Path(path)
    open_data_file(path, "checkpoint", "weights").close()  # a regular file: no FIFO, no device
    try:
        saved = torch.load(path, map_location="cpu", weights_only=True, mmap=mmap)
    except (pickle.UnpicklingError, RuntimeError, EOFError, ValueError, OSError) as exc:
        first = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else type(exc).__name__
        raise FedjouleError(
            f"{path}: not a checkpoint fedjoule can read as plain data ({first}). It was not "
            "loaded, since loading it otherwise could run code stored in it. If it comes "
            "from an older fedjoule or another tool, start a new run."
        ) from None
    if not isinstance(saved, dict) or saved.get("format") != FORMAT:
        found = saved.get("format") if isinstance(saved, dict) else type(saved).__name__
        raise FedjouleError(
            f"{path}: not a fedjoule checkpoint of format {FORMAT} (found {str(found)[:60]}); "
            "start a new run"
        )
    return saved


def check_scenario_file(saved: dict, path: Path, scenario_file: Path) -> None:
    """Before a resumed run reads its scenario.yaml (which may name plug-in code): the file
    must be the one the run wrote, byte for byte (its SHA-256 in the checkpoint), or, for
    a checkpoint without that hash, hold the checkpoint's scenario as plain YAML data."""
    recorded = saved.get("scenario_file_sha256")
    if recorded is not None and file_sha256(scenario_file) == recorded:
        return
    raw, _ = reader().read_source(scenario_file)  # plain data: safe YAML, nothing imported
    differ = differences(saved["scenario"], json.loads(json.dumps(raw, default=str)))
    if recorded is not None:
        fields = f"; they differ in {', '.join(differ[:5])}" if differ else ""
        raise FedjouleError(
            f"{path} belongs to another scenario than {scenario_file}: the file was changed "
            f"since the checkpoint was written, or the checkpoint is another run's "
            f"(SHA-256{fields}), so the run is not resumed and nothing it names is loaded; "
            "restore the file, or start a new run"
        )
    if differ:
        raise FedjouleError(
            f"{path} belongs to another scenario than {scenario_file} (they differ in "
            f"{', '.join(differ[:5])}); a run resumes only with the scenario it started with"
        )


def check_belongs(saved: dict, path: Path, scenario_data: dict, scenario_file: Path) -> None:
    """Refuse a checkpoint written by another fedjoule version or for another scenario."""
    if saved["fedjoule_version"] != __version__:
        raise FedjouleError(
            f"{path} was written by fedjoule {saved['fedjoule_version']}, this is "
            f"{__version__}; resume it with that version, or start a new run"
        )
    if saved["scenario_sha256"] == scenario_sha256(scenario_data):
        return
    differ = scenario_differences(saved["scenario"], scenario_data, scenario_file.parent)
    if differ:
        raise FedjouleError(
            f"{path} belongs to another scenario than {scenario_file} (they differ in "
            f"{', '.join(differ[:5]) or 'its content'}); a run resumes only with the scenario "
            "it started with"
        )


def scenario_differences(written: dict, scenario_data: dict, folder: Path) -> list[str]:
    """Where `written` (a resolved scenario as an older fedjoule wrote it: a checkpoint's
    copy, a run's scenario.yaml) and `scenario_data` (resolved today) differ as scenarios;
    none when they differ only by fields added since (a `protocol` or `tracking` section,
    a radio's measured range) that are at today's defaults. Only `scenario_data`'s own
    content is validated again, so nothing the written copy alone names is loaded."""
    if written == scenario_data:
        return []
    shared = keys_of_written(scenario_data, written)
    if shared != written:
        return differences(written, shared)
    try:
        today = reader().resolve_data(shared, folder, "the scenario the run was started with")
    except FedjouleError:
        return differences(written, scenario_data)
    return differences(today, scenario_data)


def keys_of_written(value: Any, written: Any) -> Any:
    """`value` without the mapping keys that `written` lacks (in nested mappings, and in
    lists of the same length element by element)."""
    if isinstance(value, dict) and isinstance(written, dict):
        return {k: keys_of_written(v, written[k]) for k, v in value.items() if k in written}
    if isinstance(value, list) and isinstance(written, list) and len(value) == len(written):
        return [keys_of_written(v, w) for v, w in zip(value, written, strict=True)]
    return value


def differences(a: Any, b: Any, prefix: str = "") -> list[str]:
    """Dotted paths where two nested mappings differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        keys = list(dict.fromkeys([*a, *b]))
        return [d for k in keys for d in differences(a.get(k), b.get(k), f"{prefix}{k}.")]
    same = a == b or (
        isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)
    )
    return [] if same else [prefix.rstrip(".") or "(top level)"]


def finished(saved: dict) -> bool:
    """The checkpoint is at the run's end: every round played, or the target reached with
    stop_at_target, or the run diverged."""
    progress = saved["simulation"]["progress"]
    training = saved["scenario"]["training"]
    reached = training["stop_at_target"] and progress.get("rounds_to_target") is not None
    diverged = progress.get("diverged_at_round") is not None
    return reached or diverged or progress["next_round"] >= training["rounds"]
