"""`fedjoule validate` checks what `run` checks before it makes its folder (issue 21, item
8): over a corpus of scenarios that load but may not run (trace files missing or
malformed, data the partition cannot split, impossible topologies), validate's exit code
equals a one-round run's, and a refused run leaves no folder."""

import importlib.util
import json
import os
import stat

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


# ------------------------------------------------- hostile data files (issue 26, item 4)


def _pickle(path, content) -> str:
    import pickle

    path.write_bytes(pickle.dumps(content, protocol=2))
    return str(path)


def _shared_lists(levels: int = 80) -> list:
    """A list of 2 references to a list of 2 references ...: a few hundred bytes pickled,
    2^levels leaves when walked as a tree."""
    value = [1.0]
    for _ in range(levels):
        value = [value, value]
    return value


def _fifo(path) -> str:
    import os

    os.mkfifo(path)
    return str(path)


def _link_trace(file) -> str:
    return f"channel.trace={{uplink: {{file: '{file}', column: r, time_column: t}}}}"


def _capacity(file) -> str:
    return f"population.capacity_trace={{file: '{file}', power_w: 2}}"


def _behaviour(t, **fields) -> str:
    entry = {"duration": 1, "finish_time": 10, "model": "m", "active": [0], "inactive": [5]}
    return _pickle(t / "behaviour.pkl", {1: {**entry, **fields}})


BEHAVIOUR_TRACE = "availability.kind=trace"
HOSTILE = {  # name: (settings from the folder t, what the one error line names)
    "availability trace a FIFO (.csv)": (
        lambda t: [BEHAVIOUR_TRACE, f"availability.trace_file={_fifo(t / 'a.csv')}"],
        "a.csv: a FIFO",
    ),
    "availability trace a FIFO (.pkl)": (
        lambda t: [BEHAVIOUR_TRACE, f"availability.trace_file={_fifo(t / 'a.pkl')}"],
        "a.pkl: a FIFO",
    ),
    "link trace a FIFO": (lambda t: [_link_trace(_fifo(t / "l.csv"))], "l.csv: a FIFO"),
    "capacity trace a FIFO": (lambda t: [_capacity(_fifo(t / "c.json"))], "c.json: a FIFO"),
    "weights a FIFO": (lambda t: [f"model.weights={_fifo(t / 'w.pt')}"], "w.pt: a FIFO"),
    "link trace a link to /dev/zero": (
        lambda t: [(t / "z.csv").symlink_to("/dev/zero") or _link_trace(t / "z.csv")],
        "z.csv: a character device",
    ),
    "pickle of shared lists (2^80 leaves)": (
        lambda t: [_capacity(_pickle(t / "c.pkl", {1: {"computation": 1.0,
                                                      "communication": 1.0,
                                                      "x": _shared_lists()}}))],
        "nested deeper than a FedScale trace",
    ),
    "client id inf": (
        lambda t: [_capacity(_pickle(t / "c.pkl", {float("inf"): {"computation": 1.0,
                                                                  "communication": 1.0}}))],
        "client id inf is not a string or an integer",
    ),
    "computation of 400 digits": (
        lambda t: [_capacity(_pickle(t / "c.pkl", {1: {"computation": 10**400,
                                                      "communication": 1.0}}))],
        "computation <an integer of about 401 digits> is not a number in [1e-06, 1e+06]",
    ),
    "finish_time of 400 digits": (
        lambda t: [BEHAVIOUR_TRACE,
                   f"availability.trace_file={_behaviour(t, finish_time=10**400)}"],
        "finish_time <an integer of about 401 digits> is not a number in (0, 1e+09]",
    ),
    "communication 5e-324": (
        lambda t: [_capacity(_pickle(t / "c.pkl", {1: {"computation": 1.0,
                                                      "communication": 5e-324}}))],
        "communication 5e-324 is not a number in [0.001, 1e+09]",
    ),
    "computation 1e308 (NaN energies)": (
        lambda t: [_capacity(_pickle(t / "c.pkl", {1: {"computation": 1e308,
                                                      "communication": 1.0}}))],
        "computation 1e+308 is not a number in [1e-06, 1e+06]",
    ),
    "CSV field of 200,000 characters": (
        lambda t: [(t / "l.csv").write_text("t,r\n0,1\n1," + "1" * 200_000 + "\n")
                   and _link_trace(t / "l.csv")],
        "line 2: not a readable CSV (field larger than field limit",
    ),
    "link trace times +-1e308": (
        lambda t: [(t / "l.csv").write_text("t,r\n-1e308,1\n1e308,2\n")
                   and _link_trace(t / "l.csv")],
        "t spans inf s; at most 1e+09 s",
    ),
    "link rate 5e-324 Mbit/s": (
        lambda t: [(t / "l.csv").write_text("t,r\n0,5e-324\n1,5e-324\n")
                   and _link_trace(t / "l.csv")],
        "a rate is 0 or from 1 to 1e+15 bit/s",
    ),
    "availability trace time 1e308": (
        lambda t: [BEHAVIOUR_TRACE, (t / "a.csv").write_text("client,start_s,end_s\n0,0,1e308\n")
                   and f"availability.trace_file={t / 'a.csv'}"],
        "within +-1e+09 s",
    ),
    "tracking.folder with a NUL byte": (
        lambda t: ["tracking.backends=[csv]", 'tracking.folder="a\\0b"'], "NUL byte"
    ),
    "tracking.folder a file": (
        lambda t: ["tracking.backends=[csv]", f"tracking.folder={_behaviour(t)}"],
        "a file is in its place",
    ),
    "tracking.folder /dev/null": (
        lambda t: ["tracking.backends=[csv]", "tracking.folder=/dev/null"],
        "folder /dev/null",
    ),
    "tracking.folder under /proc": (
        lambda t: ["tracking.backends=[csv]", "tracking.folder=/proc/fedjoule"],
        "system folder",
    ),
    "buffer_size above the population": (
        lambda t: ["protocol.kind=buffered", "protocol.buffer_size=100000"],
        "protocol.buffer_size (100000) exceeds the clients in flight (10",
    ),
    "async with batch norm": (
        lambda t: ["protocol.kind=async", "dataset.name=torchvision", "dataset.class=FakeData",
                   "dataset.options={size: 40, image_size: [1, 8, 8], num_classes: 2}",
                   "model.name=resnet18", "model.norm=batch", "population.size=4",
                   "training.clients_per_round=2", "round.min_clients=1"],
        "protocol.kind=async does not run models with running statistics (batch norm)",
    ),
    "dataset class needing a missing module": (
        lambda t: ["dataset.name=torchvision", "dataset.class=LSUN", f"dataset.root={t}"],
        "torchvision dataset 'LSUN' needs the Python module 'lmdb'",
    ),
}  # fmt: skip


@pytest.mark.timeout(60)  # (the FIFOs and the pickle of shared lists hung before)
@pytest.mark.parametrize("case", list(HOSTILE))
def test_a_hostile_file_is_one_error_line_from_validate_and_run(case, tmp_path, capsys):
    """Exit 2 from validate and from run, with one `error:` line naming the file or field,
    and no run folder left behind."""
    if case.startswith("dataset class needing"):
        pytest.importorskip("torchvision")
        if importlib.util.find_spec("lmdb") is not None:
            pytest.skip("lmdb is installed")
    make, expected = HOSTILE[case]
    sets = make(tmp_path)
    options = [a for s in [*ONE_ROUND, *sets] for a in ("--set", s)]
    out = tmp_path / "run"
    for command in (["validate"], ["run", "--out", str(out), "-q", "--device", "cpu"]):
        assert invoke([command[0], "default-theory", *options, *command[1:]]) == 2, command
        err = capsys.readouterr().err
        assert err.count("error:") == 1 and "internal error" not in err, err
        assert expected in " ".join(err.split()), err
    assert not out.exists()


def test_traces_convert_refuses_hostile_input_and_output(tmp_path, capsys):
    """A deeply nested JSON trace, a pickle of shared lists, --out in a missing folder or
    onto a FIFO: exit 2 with one error line, and nothing written."""
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    shared = _pickle(tmp_path / "shared.pkl", {1: {"computation": 1.0, "communication": 1.0,
                                                   "x": _shared_lists()}})
    good = tmp_path / "good.json"
    good.write_text('{"1": {"computation": 2.5, "communication": 100}}')
    fifo = _fifo(tmp_path / "fifo.json")
    cases = [
        ([str(deep), "--out", str(tmp_path / "a.json")], "nested too deeply"),
        ([shared, "--out", str(tmp_path / "a.json")], "nested deeper than a FedScale trace"),
        ([str(good), "--out", str(tmp_path / "no" / "a.json")], "no folder"),
        ([str(good), "--out", fifo], "not a regular file"),
    ]
    for args, expected in cases:
        assert invoke(["traces", "convert", *args]) == 2, args
        err = capsys.readouterr().err
        assert err.count("error:") == 1 and expected in err, err
    assert not (tmp_path / "a.json").exists() and not (tmp_path / "no").exists()
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert invoke(["traces", "convert", str(good), "--out", str(tmp_path / "a.json")]) == 0
    assert json.loads((tmp_path / "a.json").read_text()) == json.loads(good.read_text())
