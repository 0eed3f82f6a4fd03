"""`fedjoule validate` checks what `run` checks before it makes its folder (issue 21, item
8): over a corpus of scenarios that load but may not run (trace files missing or
malformed, data the partition cannot split, impossible topologies), validate's exit code
equals a one-round run's, and a refused run leaves no folder."""

import pytest

from fedjoule.cli import invoke

ONE_ROUND = ["training.rounds=1"]
CORPUS = {
    "valid": ("default-theory", []),
    "trace file missing": (
        "default-theory", ["availability.kind=trace", "availability.trace_file=/no/such/trace.csv"]
    ),
    "trace file malformed": (
        "default-theory", ["availability.kind=trace", "availability.trace_file={bad}"]
    ),
    "trace file empty of clients": (
        "default-theory", ["availability.kind=trace", "availability.trace_file={empty}"]
    ),
    "more clients than samples": (
        "default-theory", ["population.size=3000", "dataset.synthetic.avg_samples=1",
                    "training.clients_per_round=10"]
    ),
    "valid cells": ("dense-small-cells", ["training.rounds=1"]),
    "valid rural": ("rural-iot-low-snr", []),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CORPUS))
def test_validate_says_what_run_says(case, tmp_path, capsys):
    (tmp_path / "bad.csv").write_text("who,when\n1,2\n")
    (tmp_path / "empty.csv").write_text("client,start_s,end_s\n")
    scenario, sets = CORPUS[case]
    sets = [s.format(bad=tmp_path / "bad.csv", empty=tmp_path / "empty.csv") for s in sets]
    options = [a for s in [*ONE_ROUND, *sets] for a in ("--set", s)]
    validated = invoke(["validate", scenario, *options])
    out = tmp_path / "run"
    ran = invoke(["run", scenario, *options, "--out", str(out), "-q", "--device", "cpu"])
    message = capsys.readouterr().err
    assert validated == ran, message
    assert ran in (0, 2)
    if ran == 2:
        assert not out.exists()


def fuzz_cases(folder, n: int):
    """The first n shrunk odd scenarios of the run-time fuzzer (benchmarks/fuzz_runtime.py,
    seed 0) that load: the corpus the fuzzers run."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "fuzz_runtime.py"
    spec = importlib.util.spec_from_file_location("fuzz_runtime", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    cases, _ = module.make_cases(folder, 40, seed=0)
    return [c for c in cases if c.stem.startswith("case-")][:n]


@pytest.mark.timeout(600)
def test_validate_says_what_run_says_over_the_fuzz_corpus(tmp_path, capsys):
    cases = fuzz_cases(tmp_path / "cases", 8)
    assert len(cases) == 8
    for case in cases:
        options = ["--set", "training.rounds=1"]
        validated = invoke(["validate", str(case), *options])
        out = tmp_path / "runs" / case.stem
        ran = invoke(["run", str(case), *options, "--out", str(out), "-q", "--device", "cpu"])
        message = capsys.readouterr().err
        assert validated == ran or ran == 3, (case.name, validated, ran, message[-500:])
        if ran == 2:
            assert not out.exists()
