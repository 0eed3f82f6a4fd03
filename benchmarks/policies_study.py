"""Who takes part, at what CPU frequency and for how many local steps, on one
interference-limited deployment (issue 29, docs/policies.md#study): every built-in selector,
DVFS and local steps to the deadline, and random,
round robin and proportional fair at a low and a high SINR threshold; time, device energy
and client updates to a target accuracy, worst-client accuracy and Jain's fairness indices,
with 95 % CIs over seeds. Writes benchmarks/results/policies_study.json, the docs' plots
(docs/img/policies-*.png) and the study's tables into docs/policies.md.

The deployment (built from the built-in `dense-small-cells-interference`): 7 small cells
on one band (reuse 1, co-channel interference: each upload's SINR counts the transmissions
active at that instant in the other cells), Rayleigh block fading per round, fixed-rate
uploads that fail when the SINR falls below the threshold theta = 2^r - 1 at any instant
(the outage model of Yang et al., IEEE Trans. Commun. 2020), FDMA with equal shares (a
policy's band shares are not used: the study's selectors and DVFS run on the fixed split),
phones (two measured LTE profiles with a log-normal compute spread) and IoT nodes (a slow
CPU with a DVFS range); MNIST split Dirichlet(0.3), an MLP, FedAvg.

    FEDJOULE_DATA_DIR=../shared/datasets .venv/bin/python benchmarks/policies_study.py
    FEDJOULE_DATA_DIR=../shared/datasets .venv/bin/python benchmarks/policies_study.py --quick
    .venv/bin/python benchmarks/policies_study.py --replot   # docs from the saved JSON

The full study (16 arms x 5 seeds) takes 6 to 15 minutes on 2 shared cores; `--quick`
(2 seeds, 20 clients, 6 rounds) and `--arms a,b` (a subset) write only under --out.
"""

import argparse
import json
import math
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from record import RESULTS, save_results  # noqa: E402 - benchmarks/record.py

import fedjoule  # noqa: E402
from fedjoule.seeds import describe  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DOCS_PAGE = ROOT / "docs" / "policies.md"
IMAGES = ROOT / "docs" / "img"
BASE = "dense-small-cells-interference"
BEGIN, END = "<!-- policies_study: begin -->", "<!-- policies_study: end -->"
SELECTORS = ("random", "round-robin", "best-channel", "proportional-fair", "age", "oort",
             "power-of-choice", "battery")  # fmt: skip
LOSS_DRIVEN = ("oort", "power-of-choice")


def deployment(size: int, rounds: int, hidden: int, target: float) -> dict:
    """The scenario overrides every arm shares (on dense-small-cells-interference)."""
    iot = {"name": "iot", "share": 0.3, "compute": "cpu", "cpu_freq_min_hz": 2.0e7,
           "cpu_freq_max_hz": 1.0e8, "tx_power_dbm": 23.0}  # fmt: skip
    return {
        "dataset.name": "mnist",
        "dataset.partition": "dirichlet",
        "dataset.dirichlet_alpha": 0.3,
        "model.name": "mlp",
        "model.hidden": [hidden],
        "training.rounds": rounds,
        "training.local_steps": 10,
        "training.batch_size": 32,
        "training.lr": 0.05,
        "training.clients_per_round": 10,
        "training.eval_every": 1,
        "training.target_metric": "accuracy",
        "training.target_value": target,
        "population.size": size,
        "population.device_classes": [
            {
                "name": "phone-mid",
                "profile": "phone-lte-midrange",
                "share": 0.4,
                "compute_spread_sigma": 1.0,
            },
            {
                "name": "phone-low",
                "profile": "phone-lte-lowend",
                "share": 0.3,
                "compute_spread_sigma": 1.0,
            },
            iot,
        ],  # fmt: skip
        "availability.kind": "always",
        "channel.rate": "fixed",
        "round.min_clients": 1,
        "output.timeline_rounds": [],
    }


def se_for(threshold_db: float) -> float:
    """The spectral efficiency r whose SINR threshold 2^r - 1 is threshold_db."""
    return math.log2(1.0 + 10.0 ** (threshold_db / 10.0))


def arms(args) -> dict[str, dict]:
    """Each arm's overrides on top of the deployment, and its group."""
    mid = {"channel.spectral_efficiency_bits_per_hz": se_for(args.threshold_db),
           "round.deadline_s": args.deadline_s}  # fmt: skip
    policy = {
        "random": {},
        "round-robin": {"policy.select": "round-robin"},
        "best-channel": {"policy.select": "best-channel", "policy.csi": "oracle"},
        "proportional-fair": {"policy.select": "proportional-fair", "policy.csi": "oracle"},
        "age": {"policy.select": "age", "policy.csi": "oracle"},
        "oort": {"policy.select": "oort", "policy.oort_round_time_s": args.oort_t_s},
        "power-of-choice": {"policy.select": "power-of-choice"},
        "battery": {"policy.select": "battery"},
    }
    out = {name: {"group": "selectors", "set": {**mid, **sets}} for name, sets in policy.items()}
    out["random+dvfs"] = {"group": "dvfs", "set": {**mid, "policy.frequency": "deadline"}}
    steps = {**mid, "policy.steps": "deadline", "policy.max_steps": args.max_steps}
    out["random+steps"] = {"group": "steps", "set": steps}
    for level, db in (("low", args.low_db), ("high", args.high_db)):
        for name in ("random", "round-robin", "proportional-fair"):
            sets = {
                **policy[name],
                "channel.spectral_efficiency_bits_per_hz": se_for(db),
                "round.deadline_s": None,
            }  # no deadline: a low threshold's slow rate
            out[f"{name}@{level}"] = {"group": f"threshold-{level}", "set": sets}
    return out


def jain(values: list[float]) -> float | None:
    """Jain's fairness index (sum x)^2 / (n sum x^2) (Jain, Chiu, Hawe, DEC-TR-301, 1984)."""
    total, squares = sum(values), sum(v * v for v in values)
    return total * total / (len(values) * squares) if squares > 0 else None


KINDS = ("energy_compute_j", "energy_tx_j", "energy_rx_j", "energy_radio_promotion_j",
         "energy_radio_tail_j", "energy_idle_j", "energy_end_of_run_tail_j")  # fmt: skip


def per_class(clients: list[dict], field: str) -> dict[str, float]:
    """A clients.csv column summed per device class."""
    out: dict[str, float] = {}
    for c in clients:
        out[c["device_class"]] = out.get(c["device_class"], 0.0) + float(c[field])
    return out


def one(arm: str, sets: dict, seed: int, base: dict, out: Path) -> dict:
    """One run of an arm with one seed, through the API; its judged figures."""
    scenario = fedjoule.load_scenario(BASE, {**base, **sets, "seed": seed})
    tic = time.perf_counter()
    result = fedjoule.run(scenario, out / f"{arm}-seed{seed}", quiet=True)
    s, rounds, clients = result.summary, result.rounds, result.clients
    reached = s["rounds_to_target"]
    return {
        "arm": arm,
        "seed": seed,
        "reached": reached is not None,
        "time_to_target_s": s["time_to_target_s"],
        "energy_to_target_j": s["energy_to_target_j"],
        "updates_to_target": sum(int(r["arrived"]) for r in rounds[:reached]) if reached else None,
        "rounds_to_target": reached,
        "final_accuracy": s["final_accuracy"],
        "worst_client_accuracy": s["worst_client_accuracy"],
        "jain_participation": s.get(
            "jain_participation", jain([float(c["selected"]) for c in clients])
        ),
        "jain_energy": s.get("jain_energy", jain([float(c["energy_total_j"]) for c in clients])),
        "energy_total_j": s["energy_total_j"],
        "energy_compute_j": s["energy_compute_j"],
        "sim_time_s": s["sim_time_s"],
        "outage_fraction": s["dropped_outage"] / max(s["selected_total"], 1),
        "deadline_fraction": s["dropped_deadline"] / max(s["selected_total"], 1),
        "energy_compute_j_per_class": per_class(clients, "energy_compute_j"),
        "energy_j_per_kind": {k: s[k] for k in KINDS},
        "wall_s": time.perf_counter() - tic,
        "accuracy_curve": [r["accuracy"] for r in rounds],
    }


FIELDS = ("time_to_target_s", "energy_to_target_j", "updates_to_target", "rounds_to_target",
          "final_accuracy", "worst_client_accuracy", "jain_participation", "jain_energy",
          "energy_total_j", "energy_compute_j", "sim_time_s", "outage_fraction",
          "deadline_fraction")  # fmt: skip


def tabulate(runs: list[dict], fields: tuple[str, ...]) -> dict:
    """Per arm: how many seeds reached the target, and each field's mean and 95 % CI."""
    table = {}
    for arm in dict.fromkeys(r["arm"] for r in runs):
        mine = [r for r in runs if r["arm"] == arm]
        row = {"reached": sum(r["reached"] for r in mine), "seeds": len(mine)}
        for field in fields:
            values = [r[field] for r in mine if r[field] is not None]
            row[field] = {**describe(values), "values": values}
        table[arm] = row
    return table


def paired(runs: list[dict], arm: str, baseline: str, field: str) -> dict:
    """arm minus baseline, seed by seed (common random numbers), over the seeds where both
    have a value: mean and 95 % CI of the difference, and of the relative difference."""
    by = {(r["arm"], r["seed"]): r[field] for r in runs}
    seeds = sorted({r["seed"] for r in runs if r["arm"] == arm})
    pairs = [(by[(arm, s)], by.get((baseline, s))) for s in seeds]
    pairs = [(a, b) for a, b in pairs if a is not None and b is not None]
    return {"diff": describe([a - b for a, b in pairs]),
            "relative": describe([(a - b) / b for a, b in pairs if b])}  # fmt: skip


def comparisons(runs: list[dict], early: int) -> dict:
    """The paired differences the questions (i) to (iv) read."""
    arms_run = {r["arm"] for r in runs}
    out = {}
    for level in ("low", "high"):
        for arm, base in (("proportional-fair", "random"), ("proportional-fair", "round-robin"),
                          ("round-robin", "random")):  # fmt: skip
            arm, base = f"{arm}@{level}", f"{base}@{level}"
            if arm in arms_run and base in arms_run:
                for field in (f"accuracy_at_round_{early}", "final_accuracy", "rounds_to_target"):
                    out[f"{arm} vs {base}: {field}"] = paired(runs, arm, base, field)
    wanted = [("oort", f) for f in ("time_to_target_s", "energy_to_target_j")]
    wanted += [("random+dvfs", f) for f in ("energy_to_target_j", "time_to_target_s",
                                            "energy_compute_j")]  # fmt: skip
    wanted += [("random+steps", f) for f in ("time_to_target_s", "energy_to_target_j",
                                             "updates_to_target")]  # fmt: skip
    wanted += [(name, "worst_client_accuracy") for name in SELECTORS[1:]]
    for arm, field in wanted:
        if {arm, "random"} <= arms_run:
            out[f"{arm} vs random: {field}"] = paired(runs, arm, "random", field)
    return out


LABELS = {
    "time_to_target_s": "simulated time to target (s)",
    "energy_to_target_j": "device energy to target (J)",
    "updates_to_target": "client updates to target",
    "worst_client_accuracy": "worst-client accuracy (final)",
    "jain_participation": "Jain's index, selections",
    "jain_energy": "Jain's index, device energy",
}


def _ci(d: dict | None) -> float:
    value = (d or {}).get("ci95")
    return value if value is not None and math.isfinite(value) else 0.0


def bars(table: dict, names: list[str], fields: tuple[str, ...], path: Path) -> Path:
    """One panel per field: each arm's mean with its 95 % CI (error bar), seeds as dots."""
    fig, axes = plt.subplots(1, len(fields), figsize=(3.6 * len(fields), 3.6))
    for ax, field in zip(axes, fields, strict=True):
        for i, arm in enumerate(names):
            d = table[arm][field]
            if d["mean"] is None:
                continue
            color = "C1" if arm in LOSS_DRIVEN else f"C{0 if '+' not in arm else 2}"
            ax.bar(i, d["mean"], color=color, alpha=0.7)
            ax.errorbar(i, d["mean"], yerr=_ci(d), color="black", capsize=3)
            ax.plot([i] * len(d["values"]), d["values"], "k.", ms=3)
        ax.set_xticks(range(len(names)), names, rotation=40, ha="right", fontsize=8)
        ax.set_ylabel(LABELS[field], fontsize=9)
        ax.tick_params(axis="y", labelsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    plt.close(fig)
    return path


def curves(runs: list[dict], path: Path) -> Path:
    """(i): test accuracy against round for random, round robin and proportional fair at the
    low and the high SINR threshold, mean over seeds with 95 % CIs as error bars."""
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6), sharey=True)
    for ax, level in zip(axes, ("low", "high"), strict=True):
        for i, name in enumerate(("random", "round-robin", "proportional-fair")):
            mine = [r["accuracy_curve"] for r in runs if r["arm"] == f"{name}@{level}"]
            if not mine:
                continue
            stats = [describe(column) for column in zip(*mine, strict=False)]
            xs = [k for k, d in enumerate(stats) if d["mean"] is not None]
            ys = [stats[k]["mean"] for k in xs]
            ax.errorbar(
                xs,
                ys,
                yerr=[_ci(stats[k]) for k in xs],
                color=f"C{i}",
                label=name,
                capsize=2,
                errorevery=max(len(xs) // 8, 1),
                lw=1.2,
            )
        ax.set_xlabel("round")
        ax.set_title(f"{level} SINR threshold", fontsize=10)
        ax.legend(fontsize=8)
    axes[0].set_ylabel("test accuracy")
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    plt.close(fig)
    return path


def plots(saved: dict, folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    table, names = saved["table"], [a for a in saved["table"] if "@" not in a]
    return [
        bars(table, names, ("time_to_target_s", "energy_to_target_j", "updates_to_target"),
             folder / "policies-to-target.png"),
        bars(table, names, ("worst_client_accuracy", "jain_participation", "jain_energy"),
             folder / "policies-fairness.png"),
        curves(saved["runs"], folder / "policies-threshold.png"),
    ]  # fmt: skip


def num(x: float, spec: str = ".3g") -> str:
    """x to 3 significant digits, without an exponent for |x| in [1e-4, 1e6); round-off
    below 1e-12 shows as 0."""
    x = 0.0 if abs(x) < 1e-12 else x
    text = f"{x:{spec}}"
    return f"{x:{'+' if spec.startswith('+') else ''}.0f}" if "e+" in text else text


def cell(d: dict | None, digits: str = ".3g") -> str:
    if not d or d["mean"] is None:
        return "—"
    ci = d.get("ci95")
    return num(d["mean"], digits) + (
        f" ± {num(ci, '.2g')}" if ci is not None and math.isfinite(ci) else ""
    )


def markdown(saved: dict) -> str:
    """The study's tables, from the saved results (docs/policies.md between the markers)."""
    table, s = saved["table"], saved["settings"]
    lines = [
        f"*{s['seeds']} seeds, {s['size']} clients, 10 a round, at most {s['rounds']} rounds, "
        f"target accuracy {s['target']}; mean ± 95 % CI (Student t over the seeds); "
        f"benchmarks/results/policies_study.json, written by benchmarks/policies_study.py.*",
        "",
        "| arm | reached | time to target (s) | device energy to target (J) | updates to target "
        "| worst-client accuracy | Jain, selections | Jain, energy | outage | deadline drops "
        "| radio tail share |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for arm, row in table.items():
        if "@" in arm:
            continue
        mark = " †" if arm in LOSS_DRIVEN and not s.get("real_losses") else ""
        lines.append(f"| {arm}{mark} | {row['reached']}/{row['seeds']} | " + " | ".join(
            cell(row[f]) for f in ("time_to_target_s", "energy_to_target_j", "updates_to_target",
                                   "worst_client_accuracy", "jain_participation", "jain_energy",
                                   "outage_fraction", "deadline_fraction", "tail_share"))
                     + " |")  # fmt: skip
    if not s.get("real_losses"):
        lines += [
            "",
            "† runs without per-client training losses (the observation's loss is "
            "unknown): Oort only explores, power-of-choice ranks its candidates by id.",
        ]
    early = early_round(s)
    lines += [
        "",
        f"| arm | SINR threshold (dB) | reached | rounds to target | accuracy after "
        f"{early} rounds | final accuracy | outage |",
        "|---|---|---|---|---|---|---|",
    ]
    for arm, row in table.items():
        if "@" in arm:
            db = s["low_db"] if arm.endswith("@low") else s["high_db"]
            fields = (
                "rounds_to_target",
                f"accuracy_at_round_{early}",
                "final_accuracy",
                "outage_fraction",
            )
            lines.append(f"| {arm} | {db:g} | {row['reached']}/{row['seeds']} | "
                         + " | ".join(cell(row[f]) for f in fields) + " |")  # fmt: skip
    lines += ["", "| comparison (paired by seed) | difference | relative |", "|---|---|---|"]
    for name, d in saved["comparisons"].items():
        rel = d["relative"]
        rel_text = (
            "—" if rel["mean"] is None else f"{100 * rel['mean']:+.1f} % ± {100 * _ci(rel):.1f}"
        )
        lines.append(f"| {name} | {cell(d['diff'], '+.3g')} | {rel_text} |")
    intro = ("### Answers\n\nThe numbers each question reads (a paired difference is arm − "
             "baseline seed by seed, mean ± 95 % CI over the seeds, relative difference in "
             "brackets):")  # fmt: skip
    return "\n".join([*lines, "", intro, "", *answers(saved)])


def _pm(d: dict, digits: str = "+.3g", unit: str = "") -> str:
    """A paired difference as 'mean ± CI unit (relative %)'."""
    diff, rel = d["diff"], d["relative"]
    if diff["mean"] is None:
        return "— (no seed where both have a value)"
    text = f"{num(diff['mean'], digits)} ± {num(_ci(diff), '.2g')}{unit}"
    if rel["mean"] is not None:
        text += f" ({100 * rel['mean']:+.1f} % ± {100 * _ci(rel):.1f})"
    return text


def answers(saved: dict) -> list[str]:
    """The numbers each of the questions (i) to (iv) reads, one bullet each."""
    s, table, c = saved["settings"], saved["table"], saved["comparisons"]
    early = early_round(s)
    acc = f"accuracy_at_round_{early}"
    lines = []
    for level, db in (("high", s["high_db"]), ("low", s["low_db"])):
        means = ", ".join(
            f"{name} {cell(table[f'{name}@{level}'][acc])}"
            for name in ("random", "round-robin", "proportional-fair")
            if f"{name}@{level}" in table
        )
        pairs = "; ".join(
            f"{a} − {b} {_pm(c[f'{a}@{level} vs {b}@{level}: {acc}'])}"
            for a, b in (
                ("proportional-fair", "random"),
                ("proportional-fair", "round-robin"),
                ("round-robin", "random"),
            )  # fmt: skip
            if f"{a}@{level} vs {b}@{level}: {acc}" in c
        )
        if means:
            lines.append(f"- (i) {level} threshold ({db:g} dB), test accuracy after {early} "
                         f"rounds: {means}. Paired: {pairs}.")  # fmt: skip
    if "oort vs random: time_to_target_s" in c:
        lines.append(
            f"- (ii) oort − random, time to target: "
            f"{_pm(c['oort vs random: time_to_target_s'], unit=' s')}; energy to "
            f"target: {_pm(c['oort vs random: energy_to_target_j'], unit=' J')}."
        )
    key = "random+dvfs vs random"
    if f"{key}: energy_to_target_j" in c:
        per_class = _per_class(saved["runs"])
        lines.append(
            f"- (iii) DVFS to the deadline − fixed frequency (random selection): device energy "
            f"to target {_pm(c[f'{key}: energy_to_target_j'], unit=' J')}; time to target "
            f"{_pm(c[f'{key}: time_to_target_s'], unit=' s')}; compute energy over the run "
            f"{_pm(c[f'{key}: energy_compute_j'], unit=' J')}. Compute energy per class (mean "
            f"over the seeds, fixed → DVFS): {per_class}. Device energy over the run per kind: "
            f"{_per_class(saved['runs'], 'energy_j_per_kind')}."
        )
    key = "random+steps vs random"
    if f"{key}: time_to_target_s" in c:
        lines.append(
            f"- Local steps to the deadline (at most {s.get('max_steps')}) − fixed steps (random "
            f"selection): time to target {_pm(c[f'{key}: time_to_target_s'], unit=' s')}; "
            f"device energy to target {_pm(c[f'{key}: energy_to_target_j'], unit=' J')}; "
            f"updates to target {_pm(c[f'{key}: updates_to_target'])}."
        )
    worst = "; ".join(
        f"{name} {_pm(c[f'{name} vs random: worst_client_accuracy'])}"
        for name in SELECTORS[1:]
        if f"{name} vs random: worst_client_accuracy" in c
    )
    if worst:
        lines.append(f"- (iv) final worst-client accuracy, each selector − random: {worst}.")
    return lines


def _per_class(runs: list[dict], field: str = "energy_compute_j_per_class") -> str:
    """Each key of a per-run dictionary, mean over the seeds: random → random+dvfs."""

    def mean(arm: str, name: str) -> float:
        values = [r[field][name] for r in runs if r["arm"] == arm]
        return sum(values) / len(values)

    names = next(r[field] for r in runs if r["arm"] == "random")
    return ", ".join(f"{name} {num(mean('random', name))} → {num(mean('random+dvfs', name))} J"
                     for name in names)  # fmt: skip


def write_docs(saved: dict) -> None:
    """Replace the study's block of docs/policies.md with the tables."""
    text = DOCS_PAGE.read_text()
    if BEGIN not in text:
        return
    head, rest = text.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    DOCS_PAGE.write_text(f"{head}{BEGIN}\n{markdown(saved)}\n{END}{tail}")


def study(args, chosen: list[str] | None = None, base_extra: dict | None = None) -> dict:
    """Every chosen arm x seed; the saved dictionary (settings, table, comparisons, runs)."""
    base = {**deployment(args.size, args.rounds, args.hidden, args.target), **(base_extra or {})}
    plan = arms(args)
    runs = []
    for arm in chosen or list(plan):
        for seed in range(args.seeds):
            run = one(arm, plan[arm]["set"], seed, base, args.out)
            runs.append(run)
            print(json.dumps({k: v for k, v in run.items() if k != "accuracy_curve"}), flush=True)
    settings = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    settings["real_losses"] = True  # each update reports its training loss (train_loss.py)
    settings["arms"] = {a: plan[a] for a in dict.fromkeys(r["arm"] for r in runs)}
    return summarise(settings, runs)


def summarise(settings: dict, runs: list[dict]) -> dict:
    """The saved dictionary: settings, per-arm table, paired comparisons and the runs; the
    accuracy after a quarter of the round budget is taken from each run's curve."""
    early = early_round(settings)
    for r in runs:
        curve = r["accuracy_curve"][:early]
        r[f"accuracy_at_round_{early}"] = curve[-1] if len(curve) == early else None
        kinds = r.get("energy_j_per_kind")  # the radio's tail: its share of device energy
        r["tail_share"] = kinds["energy_radio_tail_j"] / r["energy_total_j"] if kinds else None
    return {
        "settings": settings,
        "table": tabulate(runs, (*FIELDS, f"accuracy_at_round_{early}", "tail_share")),
        "comparisons": comparisons(runs, early),
        "runs": runs,
    }


def early_round(settings: dict) -> int:
    """A quarter of the round budget: where (i) compares accuracies before they saturate."""
    return max(settings["rounds"] // 4, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--size", type=int, default=60, help="clients")
    parser.add_argument("--rounds", type=int, default=40, help="rounds at most per run")
    parser.add_argument("--hidden", type=int, default=64, help="the MLP's hidden units")
    parser.add_argument("--target", type=float, default=0.87, help="target test accuracy")
    parser.add_argument(
        "--threshold-db",
        type=float,
        default=0.0,
        help="SINR threshold of the selector and DVFS arms (dB)",
    )
    parser.add_argument("--low-db", type=float, default=-10.0, help="(i)'s low threshold")
    parser.add_argument("--high-db", type=float, default=10.0, help="(i)'s high threshold")
    parser.add_argument("--deadline-s", type=float, default=2.0, help="round.deadline_s")
    parser.add_argument(
        "--oort-t-s", type=float, default=1.0, help="Oort's preferred round time T (s)"
    )
    parser.add_argument("--max-steps", type=int, default=40, help="steps=deadline's maximum")
    parser.add_argument("--arms", default=None, help="comma-separated subset of the arms")
    parser.add_argument("--quick", action="store_true", help="a smoke test: 2 seeds, tiny")
    parser.add_argument("--out", type=Path, default=Path("runs/policies-study"))
    parser.add_argument(
        "--replot",
        action="store_true",
        help="only redraw the plots and the docs tables from the saved JSON",
    )
    args = parser.parse_args()
    partial = args.quick or args.arms  # a smoke test or a subset: kept under --out only
    if args.replot:
        saved = json.loads((RESULTS / "policies_study.json").read_text())
        saved = summarise(saved["settings"], saved["runs"])  # the tables of this version
        save_results("policies_study", saved)
    else:
        if args.quick:
            args.seeds, args.size, args.rounds, args.hidden, args.target = 2, 20, 6, 16, 0.5
        saved = study(args, args.arms.split(",") if args.arms else None)
        name = "policies_study_quick" if args.quick else "policies_study"
        path = save_results(name, saved, args.out if partial else RESULTS)
        print(f"results in {path}")
    plots(saved, args.out if partial else IMAGES)
    if not partial:
        write_docs(saved)
    print(markdown(saved))


if __name__ == "__main__":
    main()
