"""Tables and plots show what is judged: the fronts' quantities in the tables, the fronts of
the seed-means marked in report.csv, 95 % CIs clipped to each figure's physical range
(t and bootstrap), a warning naming the figures when fewer than 3 seeds make a CI,
coinciding series both visible, merged Pareto labels, tables and progress that fit 80 and
60 columns without cutting a value, the paper and style-file plot styles, plan's log
energy axis, timeline labels inside the axes and the worst client's zero explained.

The runs are small hand-written run folders (summary.json, rounds.csv, scenario.yaml):
the statistics are checked against closed forms over their numbers."""

import io
import json
import math
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from rich.console import Console
from scipy import stats

from fedjoule import arguments
from fedjoule.cli import invoke
from fedjoule.planning import plan_plots
from fedjoule.planning.pareto import Objective
from fedjoule.report import aggregate, compare, figures, plots, summary_tables, timeline
from fedjoule.report.results import read_rounds
from fedjoule.report.table import read_table
from fedjoule.run_progress import many_runs_progress
from fedjoule.scenarios.loading import load_scenario
from fedjoule.seeds import interval

T1 = stats.t.ppf(0.975, 1)  # 12.7: the t of 2 seeds


# (final accuracy, energy to target, time to target) per seed; fedprox equals fedavg
RUNS = {
    "fedavg": [(0.02, 0.40, 1.0), (0.0, 0.50, 1.2)],
    "scaffold": [(0.85, 0.60, 1.5), (0.86, 0.62, 1.4)],
    "fedprox": [(0.02, 0.40, 1.0), (0.0, 0.50, 1.2)],
}


def write_run(folder: Path, algorithm: str, seed: int, final: float, energy: float, time_s):
    """A finished run's files: 4 evaluated rounds rising to `final`, its summary."""
    folder.mkdir(parents=True)
    (folder / "scenario.yaml").write_text(
        f"name: judged\nseed: {seed}\nalgorithm: {{name: {algorithm}}}\n"
        "training: {target_metric: accuracy, target_value: 0.8}\n"
    )
    accuracy = [final * (r + 1) / 4 for r in range(4)]
    lines = ["round,sim_time_end_s,cumulative_energy_j,accuracy,worst_client_accuracy"]
    for r, a in enumerate(accuracy):
        lines.append(f"{r},{time_s * (r + 1) / 4},{energy * (r + 1) / 4},{a},0.0")
    (folder / "rounds.csv").write_text("\n".join(lines) + "\n")
    (folder / "clients.csv").write_text(
        "client,device_class,selected,arrived,energy_compute_j\n0,phone,4,4,0.1\n"
    )
    summary = {
        "final_accuracy": final,
        "worst_client_accuracy": 0.0,
        "energy_total_j": 2 * energy + 0.1234,
        "sim_time_s": 2 * time_s,
        "rounds_completed": 4,
        "rounds_to_target": 3,
        "energy_to_target_j": energy,
        "time_to_target_s": time_s,
    }
    (folder / "summary.json").write_text(json.dumps(summary))


def write_runs(root: Path) -> list[Path]:
    folders = []
    for algorithm, seeds in RUNS.items():
        for seed, (final, energy, time_s) in enumerate(seeds):
            folder = root / "runs" / f"{algorithm}__seed={seed}"
            write_run(folder, algorithm, seed, final, energy, time_s)
            folders.append(folder)
    return folders


@pytest.fixture
def runs(tmp_path) -> list[Path]:
    return write_runs(tmp_path)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """`fedjoule report` over the runs, fronts to the target: (result, out, figures)."""
    root = tmp_path_factory.mktemp("judged")
    figs: dict[str, object] = {}
    original = figures.save_plot

    def keep(fig, path, *args, **kwargs):
        figs[Path(path).name] = fig
        return original(fig, path, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(figures, "save_plot", keep)
        result = compare.compare_runs(write_runs(root), root / "out", Objective(to_target=True))
    return result, root / "out", figs


def test_report_over_two_seeds_clips_warns_marks_and_shows_coinciding(report):
    result, out, captured = report
    means = {r["group"]: r for r in read_table(out / "aggregate.csv")}
    # fedavg's final accuracy over seeds (0.02, 0): t = 12.7 reaches below 0; cut at 0
    half = T1 * np.std([0.02, 0.0], ddof=1) / math.sqrt(2)
    fedavg = means["fedavg"]
    assert float(fedavg["final_accuracy_ci95"]) == pytest.approx(half, rel=1e-9)
    assert float(fedavg["final_accuracy_ci95_lo"]) == 0.0
    assert float(fedavg["final_accuracy_ci95_hi"]) == pytest.approx(0.01 + half, rel=1e-9)
    for row in means.values():  # every bound within the figure's range
        for key, value in row.items():
            if key.endswith(("_ci95_lo", "_ci95_hi")) and value:
                assert float(value) >= 0.0, key
                if "accuracy" in key:
                    assert float(value) <= 1.0, key
    # report.csv: each run carries its group's marks on the fronts of the means
    for row in read_table(out / "report.csv"):
        group = means[row["run"].split("__")[0]]
        assert (row["pareto_energy"], row["pareto_time"]) == (
            group["pareto_energy"],
            group["pareto_time"],
        )
    assert means["scaffold"]["pareto_energy"] == "1"
    # one warning naming the figures whose CIs rest on 2 seeds
    (warning,) = result.warnings
    for name in ("accuracy_vs_round_mean.png", "pareto_energy_mean.png", "aggregate.csv"):
        assert name in warning
    assert "fewer than 3 seeds" in warning and "12.7" in warning
    # the accuracy band never leaves [0, 1]; the energy band never goes below 0
    for name, low, high in (
        ("accuracy_vs_round_mean.png", 0.0, 1.0),
        ("energy_vs_round_mean.png", 0.0, math.inf),
    ):
        ax = captured[name].axes[0]
        ys = np.concatenate([c.get_paths()[0].vertices[:, 1] for c in ax.collections])
        assert ys.min() >= low and ys.max() <= high
        assert ys.min() == low  # (the unclipped band reaches below 0: it was cut there)
    # fedprox coincides with fedavg: said in the legend, dashed on top
    ax = captured["accuracy_vs_round_mean.png"].axes[0]
    lines = {line.get_label(): line for line in ax.get_lines()}
    first, second = lines["fedavg"], lines["fedprox (= fedavg)"]
    assert list(first.get_ydata()) == list(second.get_ydata())
    assert first.get_linestyle() == "-" and second.get_linestyle() != "-"
    assert second.get_zorder() > first.get_zorder()
    # the Pareto numbers of fedavg (1) and fedprox (3), at one spot, are one label
    ax = captured["pareto_energy_mean.png"].axes[0]
    numbers = [t.get_text() for t in ax.texts]
    assert "1, 3" in numbers and "1" not in numbers and "3" not in numbers
    # whiskers: the lower accuracy whisker of fedavg stops at 0
    segments = [s for c in ax.collections for s in c.get_segments()]
    assert min(min(s[:, 1]) for s in segments) == 0.0


def test_tables_show_the_fronts_quantities_and_fit_80_and_60_columns(report):
    objective = Objective(to_target=True)
    result = report[0]
    for width in (80, 60):
        console = Console(width=width, record=True, file=io.StringIO())
        console.print(summary_tables.summary_table(result.rows, title="runs", objective=objective))
        console.print(summary_tables.aggregate_table(result.aggregate, [], "means", objective))
        text = console.export_text()
        assert max(len(line) for line in text.splitlines()) <= width
        words = set(text.split())
        # the costs to the target, not the totals (0.4 J, not 0.8 J)
        assert {"energy", "to", "target", "J"} <= words
        for row in result.rows:
            assert row["run"] in words  # never cut: scaffold__seed=0 whole
            assert f"{row['energy_to_target_j']:.4g}" in words
            assert f"{row['energy_total_j']:.4g}" not in words
        # a clipped interval printed as its bounds, whole: 0.01 [0, 0.137]
        hi = 0.01 + T1 * np.std([0.02, 0.0], ddof=1) / math.sqrt(2)
        assert f"[0, {hi:.3g}]" in text


def test_progress_keeps_counts_and_times_whole_at_80_and_60_columns():
    for width in (80, 60):
        console = Console(width=width, record=True, file=io.StringIO())
        progress = many_runs_progress(console, quiet=False)
        progress.add_task(
            "learning rounds (24/24 runs done)", total=1440, completed=720, status="x=50 ran"
        )
        progress.add_task(
            "  cells/snr=30__bw=1e+07/local_steps=20__name=scaffold",
            total=60,
            completed=7,
            status="",
        )
        console.print(progress.make_tasks_table(progress.tasks))
        text = console.export_text()
        assert max(len(line) for line in text.splitlines()) <= width
        assert "720/1440" in text and "7/60" in text
        assert len(re.findall(r"(?<![\d:])0:00:0\d(?![\d:])", text)) == 2  # elapsed, whole
        assert text.count("-:--:--") == 2  # remaining, whole
        assert "name=scaffold" in text  # a run's name broken between its parts


def test_bootstrap_interval_is_scipys_and_reproducible(runs, tmp_path):
    values = [0.70, 0.74, 0.79, 0.81]
    got = interval(values, "bootstrap", "final_accuracy")
    want = stats.bootstrap(
        (np.array(values),),
        np.mean,
        n_resamples=2000,
        method="percentile",
        rng=np.random.default_rng(0),
    ).confidence_interval
    assert (got["lo"], got["hi"]) == (pytest.approx(want.low), pytest.approx(want.high))
    assert interval(values, "bootstrap", "final_accuracy") == got  # seeded
    (tmp_path / "out").mkdir()
    groups = compare.seed_groups(runs, compare.run_labels(runs))
    aggregate.write_aggregate(tmp_path / "out", groups, Objective(), "bootstrap")
    rows = {r["group"]: r for r in read_table(tmp_path / "out" / "aggregate.csv")}
    assert json.loads((tmp_path / "out" / "aggregate.json").read_text())["ci"] == "bootstrap"
    boot = interval([0.85, 0.86], "bootstrap", "final_accuracy")
    assert float(rows["scaffold"]["final_accuracy_ci95_lo"]) == pytest.approx(boot["lo"])
    assert float(rows["scaffold"]["final_accuracy_ci95_hi"]) == pytest.approx(boot["hi"])


def test_ci_and_plot_style_are_checked_alike_on_the_command_line_and_in_the_api(
    runs, tmp_path, capsys
):
    with pytest.raises(arguments.ArgumentError, match="ci='z': expected one of t, bootstrap"):
        arguments.ci("ci", "z")
    assert invoke(["report", str(runs[0]), "--out", str(tmp_path / "o"), "--ci", "z"]) == 2
    assert "--ci='z': expected one of t, bootstrap" in capsys.readouterr().err
    with pytest.raises(arguments.ArgumentError, match="nope.mplstyle"):
        arguments.plot_style("plot_style", str(tmp_path / "nope.mplstyle"))
    with pytest.raises(arguments.ArgumentTypeError, match="plot_style=3"):
        arguments.plot_style("plot_style", 3)
    assert arguments.plot_style("plot_style", "paper") == "paper"


def svg_size_pt(path: Path) -> tuple[float, float]:
    root = ET.parse(path).getroot()
    return float(root.get("width").removesuffix("pt")), float(root.get("height").removesuffix("pt"))


def test_paper_style_has_no_titles_8_pt_labels_and_one_column_width(runs, tmp_path, captured):
    groups = compare.seed_groups(runs, compare.run_labels(runs))
    with figures.plot_style("paper"), figures.plot_formats(["svg"]):
        rows = aggregate.write_aggregate(tmp_path, groups, Objective())
        aggregate.plot_bands(tmp_path, groups[:2])
        aggregate.plot_mean_fronts(tmp_path, rows, Objective(), groups)
    for name in ("accuracy_vs_round_mean.png", "pareto_time_mean.png"):
        fig = captured[name]
        assert fig.get_size_inches()[0] == pytest.approx(3.5)
        width, _ = svg_size_pt(tmp_path / name.replace(".png", ".svg"))
        assert width == pytest.approx(3.5 * 72)
        ax = fig.axes[0]
        assert ax.get_title() == "" and (fig._suptitle is None or fig._suptitle.get_text() == "")
        assert ax.xaxis.label.get_fontsize() == 8 and ax.yaxis.label.get_fontsize() == 8
        assert {t.get_fontsize() for t in ax.get_xticklabels()} == {7}
        assert max(t.get_fontsize() for t in fig.findobj(figures.matplotlib.text.Text)) == 8
    assert figures.current_style() is None  # the block's style undone


def test_a_style_file_sets_font_sizes_and_width(runs, tmp_path, captured):
    style = tmp_path / "mine.mplstyle"
    style.write_text("axes.labelsize: 13\nxtick.labelsize: 9\nfigure.figsize: 5, 3\n")
    curves = {"a": read_rounds(runs[0] / "rounds.csv")}
    with figures.plot_style(str(style)):
        compare.plot_curves(curves, tmp_path)
    ax = captured["accuracy_vs_round.png"].axes[0]
    assert captured["accuracy_vs_round.png"].get_size_inches()[0] == pytest.approx(5.0)
    assert ax.xaxis.label.get_fontsize() == 13
    assert {t.get_fontsize() for t in ax.get_yticklabels()} == {9}
    assert ax.get_title() != ""  # a style file keeps the titles


def test_energy_vs_k_labels_every_k_and_three_energy_ticks(tmp_path, captured):
    ks = [1, 2, 5, 10, 20, 50]
    energies = [3.9, 2.1, 1.0, 0.6, 0.45, 0.31]  # one decade: a log axis
    table = [
        {"snr_db": 10.0, "bandwidth_hz": 1e6, "K": k, "E_total_j": e, "reached": 1,
         "is_best": int(e == min(energies))}
        for k, e in zip(ks, energies, strict=True)
    ]  # fmt: skip
    plan_plots.plot_energy_vs_k(
        tmp_path / "energy_vs_k.png", table, [(10.0, 1e6)], load_scenario("default-theory")
    )
    ax = captured["energy_vs_k.png"].axes[0]
    assert ax.get_yscale() == "log"
    assert [t.get_text() for t in ax.get_xticklabels()] == [str(k) for k in ks]
    FigureCanvasAgg(captured["energy_vs_k.png"]).draw()
    low, high = ax.get_ylim()
    shown = [t for t in ax.get_yticklabels() if t.get_text() and low <= t.get_position()[1] <= high]
    assert len(shown) >= 3
    assert [t.get_text() for t in shown] == [f"{t.get_position()[1]:g}" for t in shown]


def span(kind, t0, t1):
    return (kind, t0, t1, 0.0, 0, None, True)


def test_timeline_labels_stay_inside_the_axes(tmp_path, captured):
    records = [
        SimpleNamespace(client=1, cell=0, outcome="arrived", end_s=0.8,
                        spans=[span("downlink", 0.0, 0.1), span("uplink", 0.1, 0.8)]),
        SimpleNamespace(client=2, cell=0, outcome="overcommit", end_s=1.0,
                        spans=[span("downlink", 0.0, 0.1), span("uplink", 0.1, 1.0)]),
        SimpleNamespace(client=3, cell=0, outcome="offline", end_s=0.05,
                        spans=[span("downlink", 0.0, 0.05)]),
    ]  # fmt: skip
    row = {"round": 0, "sim_time_start_s": 0.0, "sim_time_end_s": 1.0, "arrived": 1, "selected": 3}
    timeline.plot_timeline(tmp_path / "timeline_round_0.png", row, records, 2.0)
    fig = captured["timeline_round_0.png"]
    ax = fig.axes[0]
    renderer = FigureCanvasAgg(fig).get_renderer()  # (saved figures are closed)
    inside = ax.get_window_extent(renderer)
    notes = [t for t in ax.texts if t.get_text() in ("overcommit", "offline")]
    assert len(notes) == 2
    for note in notes:
        box = note.get_window_extent(renderer)
        assert inside.x0 <= box.x0 and box.x1 <= inside.x1, note.get_text()


def test_the_worst_clients_zero_is_explained_in_the_legend(tmp_path, captured):
    write_run(tmp_path / "run", "fedavg", 0, 0.5, 0.4, 1.0)
    plots.plot_run(tmp_path / "run")
    ax = captured["accuracy_vs_round.png"].axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    (worst,) = [label for label in labels if label.startswith("worst client")]
    assert "0 in 4 of 4 evaluations" in worst
    assert "none of its local test samples right" in worst
