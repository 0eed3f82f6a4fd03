"""Run-time fuzzing: accepted odd scenarios, each run for 2 rounds through the CLI.

Every scenario file that `load_scenario` accepts must run to a clean end: exit 0 with
finite numbers (or NaN/inf only in a round marked `diverged`), exit 2 (a FedjouleError:
a message, no traceback), exit 3 (the run diverged; its files written) or exit 1 with
the CLI's one-line "out of memory" message (a run needing more than the harness's
per-run memory cap, MEMORY_LIMIT_BYTES, as on a smaller machine). Anything else
is a finding: a traceback or a signal (crash), no end within the timeout (hang), or a
NaN/inf written as if it were a result by a run that exited 0 (silent).

    PYTHONPATH=. FEDJOULE_DATA_DIR=../shared/datasets .venv/bin/python \\
        benchmarks/fuzz_runtime.py [--cases DIR] [--make N] [--jobs 2] [--timeout 60]

`--cases DIR`: the accepted odd files to run (e.g. written by fuzz_validation.py
--accepted-out DIR); without it, N files are made (default 320) by mutating the built-in
scenarios with extreme but valid values (only those load_scenario accepts are kept) into
--work DIR/cases. Each run goes to --work DIR/runs/<case>; the figures and the findings
(case, exit code, the end of stderr) go to benchmarks/results/fuzz-runtime.json.
"""

import argparse
import csv
import json
import math
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from record import save_results  # noqa: E402

BUILTIN = Path(__file__).resolve().parent.parent / "fedjoule" / "scenarios" / "builtin"
MEMORY_LIMIT_BYTES = 6 * 2**30  # per run: a run that needs more is a finding, not a swap storm
INF = math.inf

# The issue's cases, each on its built-in scenario (kept whole where the issue names it).
ISSUE_CASES = {
    "issue-lr-1e38": ("default", {"training.lr": 1e38}),
    "issue-lr-1e4-mnist": ("mnist-dirichlet", {"training.lr": 1e4, "training.local_steps": 5}),
    "issue-participation-1e-12": (
        "default",
        {"training.participation": "bernoulli", "training.participation_prob": 1e-12},
    ),
    "issue-feddc-bernoulli": (
        "mnist-dirichlet",
        {
            "training.participation": "bernoulli",
            "training.participation_prob": 0.15,
            "training.local_steps": 5,
        },
    ),
    "issue-diurnal-interval-1e300": ("diurnal-phones", {"round.interval_s": 1e300}),
    "issue-markov-interval-1e300": ("urban-macro", {"round.interval_s": 1e300}),
    "issue-overcommit-inf": ("default", {"round.overcommit": INF}),
    "issue-local-epochs-inf": ("default", {"training.local_epochs": INF}),
    "issue-hidden-minus-1": ("default", {"model.name": "mlp", "model.hidden": [-1]}),
    "issue-population-2-63": ("default", {"population.size": 2**63 - 1}),
    "issue-batch-1e9": ("default", {"training.batch_size": 10**9}),
    # the same, at what validation accepts
    "bound-participation-1e-6": (
        "default",
        {"training.participation": "bernoulli", "training.participation_prob": 1e-6},
    ),
    "bound-diurnal-interval-1e9": ("diurnal-phones", {"round.interval_s": 1e9}),
    "bound-markov-interval-1e9": ("urban-macro", {"round.interval_s": 1e9}),
    "bound-overcommit-10": ("urban-macro", {"round.overcommit": 10.0}),
    "bound-batch-1e4": ("default", {"training.batch_size": 10_000}),
    "bound-lr-1e300": ("default", {"training.lr": 1e300}),
    "bound-big-model": (
        "default",
        {"dataset.synthetic.dim": 100_000, "dataset.synthetic.classes": 1_000},
    ),
}

# Extreme but (mostly) valid values; validation decides which combinations are kept.
MUTATIONS: list[dict] = [
    *({"training.lr": v} for v in (1e-30, 1e-8, 10.0, 1e4, 1e20, 1e38, 1e300)),
    *({"training.lr_decay": v} for v in (1e-300, 1e-3, 0.5)),
    *({"training.weight_decay": v} for v in (1e-30, 1e10, 1e30)),
    *({"training.clip_grad_norm": v} for v in (1e-30, 1e-3, 1e30)),
    *({"training.clip_grad_norm": 1.0, "training.lr": v} for v in (1e4, 1e38)),
    *({"training.local_steps": v} for v in (1, 100)),
    *({"training.local_epochs": v} for v in (1e-9, 0.5, 3.0, INF)),
    *({"training.batch_size": v} for v in (1, 10**6, 10**9)),
    *(
        {"training.participation": "bernoulli", "training.participation_prob": v}
        for v in (1e-300, 1e-12, 1e-3, 0.15, 1.0)
    ),
    {
        "training.participation": "bernoulli",
        "training.participation_prob": 0.5,
        "round.overcommit": 2.0,
    },  # fmt: skip
    {"training.eval_every": 1000},
    {"training.eval_every": 2, "training.lr": 1e38},
    {"training.target_value": 0.0, "training.stop_at_target": True},
    {"training.target_value": 1.0, "training.target_metric": "worst_client_accuracy"},
    {"training.clients_per_round": 1, "round.min_clients": 1},
    *({"population.size": v} for v in (1, 2, 3)),
    *({"population.freeloaders.fraction": v} for v in (0.5, 1.0)),
    {
        "population.freeloaders.fraction": 0.5,
        "population.freeloaders.behaviour": "noisy",
        "population.freeloaders.noise_scale": 1e30,
    },  # fmt: skip
    *({"class.cpu_freq_min_hz": v, "class.cpu_freq_max_hz": v} for v in (1.0, 1e15)),
    *({"class.kappa": v} for v in (1e-300, 1e-10)),
    *({"class.battery_j": v} for v in (1e-300, 1e-3, 1e30)),
    *({"class.battery_threshold": v} for v in (0.0, 1.0)),
    {"class.initial_charge_min": 0.0, "class.initial_charge_max": 0.0},
    *({"class.tx_power_dbm": v} for v in (-300.0, -100.0, 100.0, 300.0)),
    *({"class.rx_power_w": v} for v in (0.0, 1e10)),
    *({"class.flops_per_cycle": v} for v in (1e-10, 1e10)),
    {"class.compute": "accelerator", "class.peak_flops": 1e-3},
    {"class.compute": "accelerator", "class.peak_flops": 1e30, "class.efficiency": 1e-6},
    *({"channel.snr_db": v} for v in (-300.0, -100.0, 0.0, 100.0, 300.0)),
    {"channel.snr_db": 10.0, "channel.downlink_snr_db": -300.0},
    *({"channel.uplink_bandwidth_hz": v} for v in (1e-300, 1.0, 1e300)),
    *({"channel.downlink_bandwidth_hz": v} for v in (1e-300, 1.0, 1e300)),
    *({"channel.bs_tx_power_dbm": v} for v in (-300.0, 300.0)),
    *({"channel.fading": "rician", "channel.rician_k": v} for v in (0.0, 1e-300, 1e300)),
    *({"channel.fading_per": "transmission", "channel.max_retx": v} for v in (1, 30)),
    *(
        {
            "channel.outage": "rayleigh",
            "channel.outage_target_se_bps_per_hz": v,
            "channel.max_retx": 3,
        }  # fmt: skip
        for v in (1e-300, 1e3)
    ),
    *({"channel.outage": "waterfall", "channel.waterfall_m": v} for v in (1e-300, 1e300)),
    {"channel.outage": "rayleigh", "channel.max_retx": 1000},
    *({"channel.access": "tdma"}, {"channel.access": "ofdma", "channel.resource_blocks": 1}),
    {"channel.access": "ofdma", "channel.resource_blocks": 10**6},
    *({"channel.cell_radius_m": v} for v in (1e-3, 1e7)),
    {"channel.min_distance_m": 1e-300},
    *({"channel.shadowing_sigma_db": v} for v in (0.0, 100.0)),
    *({"channel.path_loss": "free-space", "channel.carrier_hz": v} for v in (1.0, 1e30)),
    *({"channel.path_loss": "log-distance", "channel.pl_exponent": v} for v in (0.0, 10.0)),
    *({"channel.noise_dbm_per_hz": v} for v in (-300.0, 0.0, 100.0)),
    *({"channel.bits_per_param": v} for v in (16, 64)),
    *({"channel.header_bits": v} for v in (0, 10**9)),
    *(
        {
            "availability.kind": "markov",
            "availability.mean_on_s": a,
            "availability.mean_off_s": b,
        }  # fmt: skip
        for a, b in ((1e-6, 1e-6), (1e9, 1e-9), (1e-9, 1e9))
    ),
    {
        "availability.kind": "markov",
        "availability.mean_on_s": 1e-3,
        "availability.mean_off_s": 1e-3,
        "round.interval_s": 1e6,
    },  # fmt: skip
    *({"availability.kind": "bernoulli", "availability.p_drop": v} for v in (0.0, 1.0)),
    *(
        {
            "availability.kind": "diurnal",
            "availability.diurnal_mean": m,
            "availability.diurnal_amplitude": a,
        }  # fmt: skip
        for m, a in ((0.0, 0.0), (1.0, 1.0), (0.5, 1.0))
    ),
    {
        "availability.kind": "diurnal",
        "availability.charging_from_h": 23.0,
        "availability.charging_to_h": 1.0,
        "availability.diurnal_phase_spread_h": 1e6,
    },  # fmt: skip
    {
        "availability.kind": "diurnal",
        "availability.charging_from_h": 0.0,
        "availability.charging_to_h": 24.0,
        "round.interval_s": 1e300,
    },  # fmt: skip
    *({"round.interval_s": v} for v in (1e-9, 1e9, 1e300)),
    *({"round.deadline_s": v} for v in (1e-300, 1e-6, 1e300)),
    {"round.server_time_s": 1e300},
    *({"round.overcommit": v} for v in (1.0, 1.0000001, 10.0, 1e300, INF)),
    *({"round.idle_wait_s": v} for v in (1e-300, 1e300)),
    {"round.min_clients": "cpr"},
    {"topology.layout": "hexagonal", "topology.cells": 19},
    *(
        {"topology.layout": "grid", "topology.cells": 4, "topology.inter_site_distance_m": v}
        for v in (1e-3, 1e7)
    ),  # fmt: skip
    *({"topology.backhaul_capacity_bps": v} for v in (1e-300, 1.0, 1e300)),
    *({"topology.backhaul_latency_s": v} for v in (1e-300, 1e300)),
    *({"model.name": "mlp", "model.hidden": h} for h in ([1], [1, 1, 1], [0], [-1], [512])),
    {"model.zero_init": True},
    *({"dataset.synthetic.classes": v} for v in (2, 1000)),
    *({"dataset.synthetic.dim": v} for v in (1, 2000)),
    *({"dataset.synthetic.avg_samples": v} for v in (1, 2, 5000)),
    *({"dataset.synthetic.alpha": v, "dataset.synthetic.beta": v} for v in (0.0, 1e30)),
    {"dataset.synthetic.size_sigma": 10.0},
    {"dataset.synthetic.test_samples": 1},
    *({"dataset.name": n} for n in ("mnist", "fashion-mnist", "adult")),
    *(
        {"dataset.name": "mnist", "dataset.partition": "dirichlet", "dataset.dirichlet_alpha": v}
        for v in (1e-300, 1e-3, 1e300)
    ),
    *(
        {
            "dataset.name": "fashion-mnist",
            "dataset.partition": "shards",
            "dataset.shards_per_client": v,
        }  # fmt: skip
        for v in (1, 100)
    ),
    *(
        {"dataset.name": "adult", "dataset.sizes": "zipf", "dataset.zipf_s": v}
        for v in (1e-6, 50.0)
    ),
    {"dataset.name": "mnist", "dataset.sizes": "lognormal", "dataset.size_sigma": 10.0},
    {"dataset.name": "mnist", "dataset.local_test_samples": 1},
    {"dataset.name": "mnist", "model.name": "cnn", "training.local_steps": 2},
    *(
        {"algorithm.name": a}
        for a in (
            "fedprox",
            "scaffold",
            "feddyn",
            "feddc",
            "taco",
            "drfa",
            "drdm",
            "foolsgold",
            "stem",
            "fedacg",
        )
    ),  # fmt: skip
    *({"algorithm.name": "fedprox", "algorithm.mu": v} for v in (0.0, 1e30)),
    {"algorithm.name": "scaffold", "algorithm.server_lr": 1e30},
    *({"algorithm.name": "feddyn", "algorithm.alpha": v} for v in (1e-30, 1e30)),
    {"algorithm.name": "feddc", "algorithm.alpha": 1e30},
    {"algorithm.name": "taco", "algorithm.gamma": 1e30, "algorithm.kappa": 0.0},
    *({"algorithm.name": a, "algorithm.dual_lr": 1e30} for a in ("drfa", "drdm")),
    {"algorithm.name": "drfa", "algorithm.lambda_floor": 1e-300},
    {"algorithm.name": "foolsgold", "algorithm.confidence": 1e30},
    {"algorithm.name": "stem", "algorithm.momentum_a": 1e-30},
    {"algorithm.name": "fedacg", "algorithm.server_momentum": 0.999999, "algorithm.beta": 1e30},
    {"output.events": True, "output.timeline_rounds": [0, 1]},
    {"seed": 2**63 - 1},
    # at the validated bounds (the schema's limits)
    {"training.participation": "bernoulli", "training.participation_prob": 1e-6},
    *({"round.interval_s": 1e9, "availability.kind": k} for k in ("markov", "diurnal")),
    {
        "availability.kind": "markov",
        "availability.mean_on_s": 1e-3,
        "availability.mean_off_s": 1e-3,
        "round.interval_s": 1e9,
    },  # fmt: skip
    {
        "availability.kind": "markov",
        "availability.mean_on_s": 1e9,
        "availability.mean_off_s": 1e-3,
        "round.interval_s": 1e9,
    },  # fmt: skip
    *({"round.deadline_s": v} for v in (1e-3, 1e9)),
    *({"round.server_time_s": 1e9}, {"round.idle_wait_s": 1e9}),
    {"training.local_epochs": 1000.0, "training.batch_size": 10_000},
    {"training.local_steps": 1000},
    {"training.lr": 1e300, "training.weight_decay": 1e300},
    {"training.clip_grad_norm": 1e-300, "training.lr": 1e300},
    {"population.freeloaders.fraction": 0.99},
    {
        "population.freeloaders.fraction": 0.5,
        "population.freeloaders.behaviour": "noisy",
        "population.freeloaders.noise_scale": 1e6,
    },  # fmt: skip
    {"channel.max_retx": 100, "channel.outage": "waterfall", "channel.waterfall_m": 1e6},
    *({"topology.backhaul_latency_s": v} for v in (1e9,)),
    {"topology.backhaul_capacity_bps": 1.0, "channel.header_bits": 10**9},
    {"dataset.synthetic.classes": 1000, "dataset.synthetic.dim": 1000, "model.name": "logistic"},
]


def set_path(scenario: dict, path: str, value) -> None:
    """Set a dotted path; `class.x` sets x in every device class."""
    if path.startswith("class."):
        classes = scenario.setdefault("population", {}).setdefault("device_classes", [{}])
        for c in classes:
            c[path.split(".", 1)[1]] = value
        return
    keys = path.split(".")
    node = scenario
    for key in keys[:-1]:
        node = node.setdefault(key, {})
        if not isinstance(node, dict):
            return
    node[keys[-1]] = value


def shrink(scenario: dict, rng: random.Random) -> None:
    """Small and quick: 2 rounds, a few clients, little local work."""
    training = scenario.setdefault("training", {})
    population = scenario.setdefault("population", {})
    size = rng.choice([4, 8, 12, 20])
    population["size"] = size
    training["rounds"] = 2
    training["clients_per_round"] = min(int(training.get("clients_per_round", 10)), size, 6)
    training["local_steps"] = min(int(training.get("local_steps", 10)), 5)
    training.pop("local_epochs", None)
    round_section = scenario.setdefault("round", {})
    if int(round_section.get("min_clients", 1)) > training["clients_per_round"]:
        round_section["min_clients"] = 1
    if scenario.get("dataset", {}).get("name", "synthetic") not in ("synthetic", "adult"):
        scenario["dataset"]["name"] = "synthetic"  # vision only where a mutation asks
    synthetic = scenario.setdefault("dataset", {}).setdefault("synthetic", {})
    synthetic["avg_samples"] = min(int(synthetic.get("avg_samples", 200)), 100)
    model = scenario.setdefault("model", {})
    if model.get("name") == "cnn":
        model["name"] = "mlp"
    if model.get("name") == "mlp":
        model["hidden"] = [32]
    output = scenario.setdefault("output", {})
    output["timeline_rounds"] = []


def make_cases(folder: Path, n: int, seed: int = 0) -> tuple[list[Path], int]:
    """Up to n accepted odd scenario files in `folder`; returns them and the rejected count."""
    from fedjoule.errors import FedjouleError
    from fedjoule.scenarios.loading import load_scenario, read_source

    folder.mkdir(parents=True, exist_ok=True)
    bases = {p.stem: read_source(p)[0] for p in sorted(BUILTIN.glob("*.yaml"))}
    rng = random.Random(seed)
    plans = [(name, base, [overrides], False) for name, (base, overrides) in ISSUE_CASES.items()]
    for i in range(20 * n):
        base = rng.choice(sorted(bases))
        chosen = rng.sample(MUTATIONS, rng.choice([1, 1, 2, 2, 3]))
        plans.append((f"case-{i:04d}-{base}", base, chosen, True))
    accepted, rejected = [], 0
    for name, base, mutations, small in plans:
        if len(accepted) >= n + len(ISSUE_CASES):
            break
        scenario = json.loads(json.dumps(bases[base]))
        scenario["name"] = name
        if small:
            shrink(scenario, rng)
        else:
            scenario.setdefault("training", {})["rounds"] = 2
        for mutation in mutations:
            for path, value in mutation.items():
                if value == "cpr":
                    value = scenario["training"].get("clients_per_round", 10)
                set_path(scenario, path, value)
        path = folder / f"{name}.yaml"
        path.write_text(yaml.safe_dump(scenario, sort_keys=False))
        try:
            load_scenario(str(path))
        except (FedjouleError, ValueError, TypeError, OverflowError):
            rejected += 1
            path.unlink()
            continue
        accepted.append(path)
    return accepted, rejected


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT_BYTES, MEMORY_LIMIT_BYTES))


NONFINITE = {"nan", "inf", "-inf", "+inf", "infinity", "-infinity", "+infinity"}


def nonfinite_cells(path: Path) -> list[str]:
    """'column=value' for every nan/inf cell of a CSV."""
    if not path.exists():
        return []
    found = []
    with path.open() as f:
        for row in csv.DictReader(f):
            found += [f"{k}={v}" for k, v in row.items() if str(v).strip().lower() in NONFINITE]
    return found


def nonfinite_json(value, where="") -> list[str]:
    if isinstance(value, float) and not math.isfinite(value):
        return [where]
    if isinstance(value, dict):
        return [x for k, v in value.items() for x in nonfinite_json(v, f"{where}.{k}")]
    if isinstance(value, list):
        return [x for i, v in enumerate(value) for x in nonfinite_json(v, f"{where}[{i}]")]
    return []


def classify(case: Path, out: Path, rc: int | None, stderr: str) -> tuple[str, str]:
    """The outcome of one run and a detail line."""
    if rc is None:
        return "hang", ""
    if rc == 1 and "error: out of memory:" in stderr and "Traceback" not in stderr:
        # the run needs more than MEMORY_LIMIT_BYTES: a clean message, as on a small machine
        return "out_of_memory", ""
    if "Traceback" in stderr or rc == 1 or rc < 0 or rc not in (0, 2, 3):
        return "crash", f"exit {rc}"
    if rc == 2:
        return "clean_error", ""
    summary_path = out / "summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.exists() else None
    if rc == 3:
        ok = summary is not None and summary.get("diverged_at_round") is not None
        return ("diverged_exit", "") if ok else ("crash", "exit 3 without a diverged summary")
    if summary is None:
        return "crash", "exit 0 without summary.json"
    bad = nonfinite_json(summary, "summary")
    rounds_path = out / "rounds.csv"
    diverged = False
    if rounds_path.exists():
        with rounds_path.open() as f:
            diverged = any(r.get("diverged") == "1" for r in csv.DictReader(f))
    cells = nonfinite_cells(rounds_path) + nonfinite_cells(out / "clients.csv")
    if bad:
        return "silent_nonfinite", f"summary.json: {bad[:5]}"
    if cells and not (diverged and summary.get("diverged_at_round") is not None):
        return "silent_nonfinite", f"csv cells: {cells[:5]}"
    if summary.get("diverged_at_round") is not None:
        return "diverged_exit0", "diverged, exit 0 (run.py does not raise RunDiverged yet)"
    return "ok", ""


def run_case(case: Path, runs: Path, timeout_s: float, data_dir: str | None) -> dict:
    fedjoule = Path(sys.executable).parent / "fedjoule"
    out = runs / case.stem
    command = [
        str(fedjoule), "run", str(case), "--set", "training.rounds=2", "--out", str(out),
        "-q", "--threads", "1", "--device", "cpu",
    ]  # fmt: skip
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }
    if data_dir:
        env["FEDJOULE_DATA_DIR"] = data_dir
    tic = time.perf_counter()
    try:
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=env,
            preexec_fn=_limit_memory,
        )
        rc, stderr, stdout = done.returncode, done.stderr, done.stdout
    except subprocess.TimeoutExpired as expired:
        rc = None
        stderr = (expired.stderr or b"").decode(errors="replace") if expired.stderr else ""
        stdout = ""
    wall_s = time.perf_counter() - tic
    outcome, detail = classify(case, out, rc, stderr)
    tail = (stderr or stdout).strip().splitlines()[-12:]
    return {
        "case": case.name,
        "outcome": outcome,
        "exit": rc,
        "wall_s": round(wall_s, 2),
        "detail": detail,
        "tail": tail if outcome not in ("ok", "diverged_exit") else tail[-2:],
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=Path, help="folder of accepted odd scenario files")
    parser.add_argument("--make", type=int, default=320, help="files to make without --cases")
    parser.add_argument("--work", type=Path, default=None, help="cases and runs (default tmp)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--only", default="", help="run only cases whose name contains this")
    parser.add_argument("--name", default="fuzz-runtime", help="results file name")
    args = parser.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="fuzz-runtime-"))
    runs = work / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    rejected = None
    if args.cases:
        cases = sorted(args.cases.glob("*.y*ml"))
    else:
        cases, rejected = make_cases(work / "cases", args.make)
    cases = [c for c in cases if args.only in c.name]
    data_dir = os.environ.get("FEDJOULE_DATA_DIR")
    print(f"{len(cases)} cases ({rejected} rejected by validation); runs in {runs}", flush=True)
    results = []
    with ThreadPoolExecutor(max_workers=max(1, min(args.jobs, 2))) as pool:
        for result in pool.map(lambda c: run_case(c, runs, args.timeout, data_dir), cases):
            results.append(result)
            if result["outcome"] not in ("ok", "clean_error", "diverged_exit", "diverged_exit0"):
                print(f"{result['outcome']:>16}  {result['case']}  {result['detail']}", flush=True)
                for line in result["tail"][-4:]:
                    print(f"{'':>18}{line}", flush=True)
    counts: dict[str, int] = {}
    for result in results:
        counts[result["outcome"]] = counts.get(result["outcome"], 0) + 1
    errors: dict[str, int] = {}  # the clean errors by their first line, for a look
    for result in results:
        if result["outcome"] == "clean_error" and result["tail"]:
            errors[result["tail"][0][:120]] = errors.get(result["tail"][0][:120], 0) + 1
    figures = {
        "cases": len(results),
        "rejected_by_validation": rejected,
        "counts": counts,
        "timeout_s": args.timeout,
        "wall_s_total": round(sum(r["wall_s"] for r in results), 1),
        "findings": [
            r
            for r in results
            if r["outcome"] not in ("ok", "clean_error", "diverged_exit", "diverged_exit0")
        ],  # fmt: skip
        "results": results,
    }
    path = save_results(args.name, figures)
    print(json.dumps(counts), f"-> {path}")


if __name__ == "__main__":
    main()
