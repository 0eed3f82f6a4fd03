"""The plots as a researcher reads them: accuracy as a step function of rounds, time and
energy (rounds from 0), the scenario's target drawn, time in s/min/h/days, log axes where
data spans decades, energy by class per device and per participation, every K of a plan
shown on its own tick, Pareto labels that do not collide, titles naming scenario and
algorithm, and PDF/SVG copies on request."""

import csv
import math
import os
from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402

from fedjoule.errors import FedjouleError  # noqa: E402
from fedjoule.planning import pareto, plan_plots  # noqa: E402
from fedjoule.report import compare, figures, plots, timeline  # noqa: E402
from fedjoule.report.figures import PlotContext  # noqa: E402
from fedjoule.report.results import ENERGY_FIELDS, read_rounds  # noqa: E402
from fedjoule.scenarios.loading import load_scenario  # noqa: E402
from fedjoule.simulator.run import run_scenario  # noqa: E402

PDF, SVG, PNG = b"%PDF-", b"<svg", b"\x89PNG\r\n\x1a\n"


def lines_by_label(ax) -> dict:
    return {line.get_label(): line for line in ax.get_lines()}


# ---------------------------------------------------------------- formats


def test_formats_are_validated_and_name_the_bad_value():
    with pytest.raises(FedjouleError, match="'jpeg'"):
        figures.set_plot_formats(["png", "jpeg"])
    with pytest.raises(FedjouleError, match="'tiff'"):
        with figures.plot_formats("pdf,tiff"):
            pass
    assert figures.check_formats(["SVG", ".pdf"]) == ("png", "pdf", "svg")
    assert figures.check_formats([]) == ("png",)  # png is always written


def test_plot_formats_write_valid_pdf_and_svg_beside_the_png(tmp_path, monkeypatch):
    monkeypatch.delenv(figures.FORMATS_ENV, raising=False)

    def draw(name):
        fig, ax = plt.subplots()
        ax.plot([0, 1], [1, 0])
        return figures.save_plot(fig, tmp_path / name)

    draw("plain.png")
    assert [p.name for p in sorted(tmp_path.iterdir())] == ["plain.png"]
    with figures.plot_formats(["png", "pdf", "svg"]) as formats:
        assert formats == ("png", "pdf", "svg")
        assert os.environ[figures.FORMATS_ENV] == "png,pdf,svg"  # for spawned runs
        assert draw("both.png") == tmp_path / "both.png"
    assert figures.current_formats() == ("png",)
    assert figures.FORMATS_ENV not in os.environ
    assert (tmp_path / "both.png").read_bytes()[:8] == PNG
    assert (tmp_path / "both.pdf").read_bytes()[:5] == PDF
    assert SVG in (tmp_path / "both.svg").read_bytes()[:2000]
    assert not (tmp_path / "plain.pdf").exists()
    # a process spawned with the variable set writes the same formats
    monkeypatch.setenv(figures.FORMATS_ENV, "svg")
    draw("spawned.png")
    assert (tmp_path / "spawned.svg").exists() and not (tmp_path / "spawned.pdf").exists()


# ---------------------------------------------------------------- helpers


@pytest.mark.parametrize(
    "span_s, unit",
    [
        (0.3, "s"),
        (90, "s"),
        (150, "min"),
        (7000, "min"),
        (2.5e4, "h"),
        (86400, "h"),
        (3 * 86400, "days"),
    ],
)
def test_time_unit_follows_the_span(span_s, unit):
    assert figures.time_unit(span_s)[0] == unit


def test_time_axis_scales_or_goes_log_with_duration_ticks():
    fig, ax = plt.subplots()
    scaled, unit = figures.time_axis(ax, [3600.0, 2.5e4])
    assert unit == "h" and scaled == pytest.approx([1.0, 2.5e4 / 3600])
    assert ax.get_xlabel() == "simulated time (h)" and ax.get_xscale() == "linear"
    fig, ax = plt.subplots()
    values, unit = figures.time_axis(ax, [0.1, 50.0, 86400.0])
    assert unit == "s" and values == [0.1, 50.0, 86400.0] and ax.get_xscale() == "log"
    ax.set_xlim(0.05, 1e5)
    fig.canvas.draw()
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert labels == ["0.1 s", "1 s", "10 s", "1 min", "10 min", "1 h", "1 day"]


def test_step_xy_holds_each_value_until_the_next_point():
    xs, ys = figures.step_xy([0, 1, 3], [0.5, 0.6, 0.7])
    assert xs == [0, 1, 1, 3, 3]
    assert ys == [0.5, 0.5, 0.6, 0.6, 0.7]
    fig, ax = plt.subplots()
    line = figures.plot_steps(ax, [0, 1, 3], [0.5, 0.6, 0.7], label="acc")
    assert list(line.get_xdata()) == xs and list(line.get_ydata()) == ys
    assert line.get_markevery() == slice(0, None, 2)  # markers on the measured points only


def test_plot_band_draws_the_mean_and_shades_between_lo_and_hi():
    fig, ax = plt.subplots()
    line = figures.plot_band(ax, [0, 1, 2], [0.5, 0.6, 0.7], [0.4, 0.5, 0.6], [0.6, 0.7, 0.8], "m")
    assert list(line.get_ydata()) == [0.5, 0.6, 0.7] and line.get_label() == "m"
    (band,) = ax.collections
    vertices = band.get_paths()[0].vertices
    assert vertices[:, 1].min() == pytest.approx(0.4) and vertices[:, 1].max() == 0.8
    fig, ax = plt.subplots()
    line = figures.plot_band(ax, [0, 2], [0.5, 0.7], [0.4, 0.6], [0.6, 0.8], "s", step=True)
    assert list(line.get_xdata()) == [0, 2, 2] and list(line.get_ydata()) == [0.5, 0.5, 0.7]


def test_target_lines_one_per_target_each_in_its_own_dash():
    fig, ax = plt.subplots()
    contexts = [
        PlotContext("a", "fedavg", "accuracy", 0.7),
        PlotContext("b", "fedavg", "accuracy", 0.7),
        PlotContext("c", "fedprox", "accuracy", 0.8),
        PlotContext("d", "fedavg", "worst_client_accuracy", 0.5),  # not shown on this plot
        PlotContext("e", "fedavg", "accuracy", None),
    ]
    lines = figures.add_target_lines(ax, contexts, ["accuracy"])
    assert [line.get_ydata()[0] for line in lines] == [0.7, 0.8]
    assert [line.get_label() for line in lines] == [
        "target: accuracy ≥ 0.7",
        "target: accuracy ≥ 0.8",
    ]
    assert lines[0].get_linestyle() != lines[1].get_linestyle()
    title = figures.plot_title("x", contexts)
    assert title == "x\n5 scenarios · algorithms fedavg, fedprox"
    assert figures.plot_title("x", PlotContext("s", "drdm")) == "x\nscenario s · algorithm drdm"


def test_place_labels_keeps_clustered_labels_apart():
    fig, ax = plt.subplots(figsize=(5, 4))
    xs, ys = [1.0, 1.01, 1.02, 1.0, 1.01, 5.0], [0.5, 0.5, 0.5, 0.505, 0.505, 0.9]
    ax.scatter(xs, ys)
    ax.set_xlim(0, 6)
    ax.set_ylim(0, 1)
    fig.tight_layout()
    notes = figures.place_labels(ax, xs, ys, [f"run {i}" for i in range(6)])
    renderer = fig.canvas.get_renderer()
    boxes = [n.get_window_extent(renderer) for n in notes]
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            assert not a.overlaps(b), (a, b)


# ---------------------------------------------------------------- a run's plots


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    overrides = [
        "training.rounds=5",
        "training.eval_every=2",
        "training.target_value=0.55",
        "output.timeline_rounds=[0]",
    ]
    run_scenario(load_scenario("default-theory", overrides), out, device="cpu")
    return out


def test_run_plots_are_steps_from_round_0_with_the_target(run_dir, captured):
    plots.plot_run(run_dir)
    rows = [r for r in read_rounds(run_dir / "rounds.csv") if r["accuracy"] == r["accuracy"]]
    rounds = [r["round"] for r in rows]
    accuracy = [r["accuracy"] for r in rows]
    ax = captured["accuracy_vs_round.png"].axes[0]
    line = lines_by_label(ax)["test accuracy"]
    assert list(line.get_xdata()) == figures.step_xy(rounds, accuracy)[0]  # no +1
    assert list(line.get_ydata()) == figures.step_xy(rounds, accuracy)[1]
    target = lines_by_label(ax)["target: accuracy ≥ 0.55"]
    assert list(target.get_ydata()) == [0.55, 0.55]
    assert ax.get_title() == "accuracy against round\nscenario default-theory · algorithm fedavg"
    # time: in the unit of its span, a step line too
    ax = captured["accuracy_vs_time.png"].axes[0]
    times = [r["sim_time_end_s"] for r in rows]
    unit, scale = figures.time_unit(max(times))
    assert ax.get_xlabel() == f"simulated time at the evaluation ({unit})"
    xs, ys = figures.step_xy([t / scale for t in times], accuracy)
    line = lines_by_label(ax)["test accuracy"]
    assert list(line.get_xdata()) == pytest.approx(xs) and list(line.get_ydata()) == ys
    ax = captured["accuracy_vs_energy.png"].axes[0]
    energy = [r["cumulative_energy_j"] for r in rows]
    assert (
        list(lines_by_label(ax)["test accuracy"].get_xdata()) == figures.step_xy(energy, energy)[0]
    )
    assert ax.get_xscale() == ("log" if max(energy) / min(energy) >= 100 else "linear")
    # the run's timeline of round 0 (rounds from 0 as in rounds.csv)
    assert (run_dir / "timeline_round_0.png").read_bytes()[:8] == PNG


def test_energy_by_class_per_device_and_per_participation(run_dir, captured):
    plots.plot_energy_by_class(run_dir)
    fig = captured["energy_by_class.png"]
    per_device, per_selection = fig.axes[:2]
    totals, devices, selected = {}, {}, {}
    with (run_dir / "clients.csv").open() as f:
        for row in csv.DictReader(f):
            c = row["device_class"]
            totals[c] = totals.get(c, 0.0) + sum(float(row[k]) for k in ENERGY_FIELDS)
            devices[c] = devices.get(c, 0) + 1
            selected[c] = selected.get(c, 0) + int(row["selected"])
    names = list(totals)
    assert len(names) == 2  # phones and IoT nodes

    def bar_tops(ax):
        tops = {}
        for patch in ax.patches:
            i = round(patch.get_x() + patch.get_width() / 2)
            tops[i] = max(tops.get(i, 0.0), patch.get_y() + patch.get_height())
        return [tops[i] for i in range(len(names))]

    assert bar_tops(per_device) == pytest.approx([totals[c] / devices[c] for c in names])
    assert bar_tops(per_selection) == pytest.approx([totals[c] / selected[c] for c in names])
    ticks = [t.get_text() for t in per_device.get_xticklabels()]
    assert ticks == [f"{c}\n{devices[c]} devices\n{selected[c]} participations" for c in names]
    legend = [t.get_text() for t in per_selection.get_legend().get_texts()]
    assert legend[:3] == ["compute", "transmit", "receive"]
    assert (
        fig._suptitle.get_text()
        == "energy by device class\nscenario default-theory · algorithm fedavg"
    )


def test_plot_run_writes_every_requested_format(run_dir, tmp_path):
    for name in ("rounds.csv", "clients.csv", "scenario.yaml", "summary.json"):
        (tmp_path / name).write_bytes((run_dir / name).read_bytes())
    with figures.plot_formats(["pdf", "svg"]):
        written = plots.plot_run(tmp_path)
    assert len(written) == 4
    for png in written:
        assert png.read_bytes()[:8] == PNG
        assert png.with_suffix(".pdf").read_bytes()[:5] == PDF
        assert SVG in png.with_suffix(".svg").read_bytes()[:2000]


# ---------------------------------------------------------------- timeline


def test_timeline_in_hours_with_every_mark_in_the_legend(tmp_path, captured):
    span = (
        ("downlink", 0.0, 600.0, 1.0, 8, None, True),
        ("compute", 600.0, 4000.0, 1.0, 0, None, True),
        ("uplink", 4000.0, 7200.0, 1.0, 8, 0, True),
    )
    records = [
        SimpleNamespace(client=3, cell=0, spans=span, outcome="arrived", end_s=7200.0),
        SimpleNamespace(client=1, cell=0, spans=span[:2], outcome="dropped", end_s=4000.0),
    ]
    row = {
        "round": 0,
        "sim_time_start_s": 0.0,
        "sim_time_end_s": 7200.0,
        "arrived": 1,
        "selected": 2,
    }
    timeline.plot_timeline(tmp_path / "timeline_round_0.png", row, records, deadline_s=1e6)
    ax = captured["timeline_round_0.png"].axes[0]
    assert ax.get_xlabel() == "simulated time since the round's start (h)"
    widths = sorted(round(p.get_width(), 6) for p in ax.patches)
    assert widths[-1] == pytest.approx(3400 / 3600)  # the computation, in hours
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == [
        "download",
        "compute",
        "upload",
        "waiting for the round",
        "client left the round",
        "round deadline 11.6 days (beyond the right edge)",
    ]
    assert ax.get_title().startswith("round 0: 1 of 2 arrived, 2 h")


# ---------------------------------------------------------------- comparisons


def test_compare_curves_are_steps_with_targets_and_names(tmp_path, captured):
    def rows(times, accs):
        return [
            {"round": i, "sim_time_end_s": t, "cumulative_energy_j": 1.0 + i, "accuracy": a}
            for i, (t, a) in enumerate(zip(times, accs, strict=True))
        ]

    curves = {"a": rows([600, 1200, 1800], [0.2, 0.4, 0.5]), "b": rows([900, 3600], [0.3, 0.6])}
    contexts = {
        "a": PlotContext("s1", "fedavg", "accuracy", 0.5),
        "b": PlotContext("s2", "drdm", "accuracy", 0.6),
    }
    compare.plot_curves(curves, tmp_path, contexts)
    ax = captured["accuracy_vs_time.png"].axes[0]
    assert ax.get_xlabel() == "simulated time at the evaluation (min)"
    line = lines_by_label(ax)["b"]
    assert list(line.get_xdata()) == [15, 60, 60] and list(line.get_ydata()) == [0.3, 0.3, 0.6]
    labels = lines_by_label(ax)
    assert "target: accuracy ≥ 0.5" in labels and "target: accuracy ≥ 0.6" in labels
    assert ax.get_title().endswith("scenarios s1, s2 · algorithms drdm, fedavg")
    ax = captured["accuracy_vs_round.png"].axes[0]
    assert list(lines_by_label(ax)["a"].get_xdata())[0] == 0  # rounds from 0


def test_pareto_front_numbers_its_members_and_keys_every_mark(tmp_path, captured):
    rows = [
        {
            "run": f"r{i}",
            "energy_total_j": e,
            "sim_time_s": t,
            "final_accuracy": a,
            "target_metric": "accuracy",
            "target_value": 0.6,
        }
        for i, (e, t, a) in enumerate(
            [
                (1.0, 10, 0.5),
                (1.01, 11, 0.55),
                (1.02, 12, 0.56),
                (5.0, 3600, 0.7),
                (2.0, 20, 0.4),
                (500.0, 86400, 0.71),
                (None, None, 0.9),
            ]
        )
    ]
    labels = [r["run"] for r in rows]
    pareto.write_front_plots(rows, labels, tmp_path)
    ax = captured["pareto_energy.png"].axes[0]
    front = [m["run"] for m in pareto.front_table(rows, labels, "energy")]
    assert front == ["r0", "r1", "r2", "r3", "r5"]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend[:3] == ["Pareto front", "dominated (1 runs)", "target: accuracy ≥ 0.6"]
    assert legend[3:] == [
        "r0: 1 J, 0.5",
        "r1: 1.01 J, 0.55",
        "r2: 1.02 J, 0.56",
        "r3: 5 J, 0.7",
        "r5: 500 J, 0.71",
    ]
    assert ax.get_xscale() == "log"  # 1 J to 500 J
    numbers = [t for t in ax.texts if t.get_text().isdigit()]
    assert sorted(t.get_text() for t in numbers) == ["1", "2", "3", "4", "5"]
    renderer = FigureCanvasAgg(ax.figure).get_renderer()  # (the saved figure is closed)
    boxes = [t.get_window_extent(renderer) for t in numbers]
    assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])
    assert "1 of 7 runs not shown" in ax.get_title()
    ax = captured["pareto_time.png"].axes[0]
    assert ax.get_xscale() == "log" and ax.get_xlabel() == "simulated time (log scale)"
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "r3: 1 h, 0.7" in legend and "r5: 1 day, 0.71" in legend


# ---------------------------------------------------------------- plan


def plan_scenario():
    return load_scenario(
        "default-theory",
        ["training.target_value=0.7", "training.target_metric=worst_client_accuracy"],
    )


def energy_table(ks, cells_energies):
    table = []
    for (snr, bw), energies in cells_energies.items():
        best = min((e for e in energies if e is not None), default=None)
        for k, e in zip(ks, energies, strict=True):
            table.append(
                {
                    "K": k,
                    "snr_db": snr,
                    "bandwidth_hz": bw,
                    "reached": int(e is not None),
                    "E_total_j": e,
                    "is_best": int(e is not None and e == best),
                }
            )
    return table


def test_energy_vs_k_shows_every_k_of_the_grid(tmp_path, captured):
    ks = [1, 2, 5, 10, 20]
    cells = {(0.0, 1e5): [None, 30.0, 12.0, 8.0, 9.0], (30.0, 1e7): [None, None, 0.5, 0.9, 2.0]}
    path = plan_plots.plot_energy_vs_k(
        tmp_path / "energy_vs_k.png", energy_table(ks, cells), list(cells), plan_scenario()
    )
    assert path.read_bytes()[:8] == PNG
    ax = captured["energy_vs_k.png"].axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "2", "5", "10", "20"]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"  # 0.5 J to 30 J
    lines = ax.get_lines()
    reached = {ln.get_label(): ln for ln in lines if not ln.get_label().startswith("_")}
    first = reached["0 dB, 100 kHz"]
    assert list(first.get_xdata()) == ks  # every K a point, the unreached one left as NaN
    assert math.isnan(first.get_ydata()[0]) and list(first.get_ydata())[1:] == [30, 12, 8, 9]
    hollow = [ln for ln in lines if ln.get_markerfacecolor() == "none" and ln.get_markersize() < 10]
    assert sorted(list(ln.get_xdata()) for ln in hollow) == [[1], [1, 2]]
    assert all(min(ln.get_ydata()) > 0.8 for ln in hollow)  # axes fraction: the top band
    texts = [t.get_text() for t in ax.texts]
    assert "not reached" in texts
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["0 dB, 100 kHz", "30 dB, 10 MHz", "K not reached", "K* (least E)"]
    assert ax.get_title() == (
        "energy to worst client accuracy ≥ 0.7 against K\n"
        "scenario default-theory · algorithm fedavg"
    )
    # no y tick inside the 'not reached' band
    ymin, ymax = ax.get_ylim()
    band_low = 10 ** (math.log10(ymax) - 3 * plan_plots.NOT_REACHED_ROW * math.log10(ymax / ymin))
    assert all(t <= band_low for t in ax.get_yticks())


def test_kstar_heatmap_and_breakeven_use_the_k_grid_as_ticks(tmp_path, captured):
    scenario = plan_scenario()
    best = [
        {"snr_db": 0.0, "bandwidth_hz": 1e5, "K_star": 20, "E_total_j": 9.0},
        {"snr_db": 30.0, "bandwidth_hz": 1e5, "K_star": 5, "E_total_j": 0.5},
        {"snr_db": 0.0, "bandwidth_hz": 1e7, "K_star": None, "E_total_j": None},
        {"snr_db": 30.0, "bandwidth_hz": 1e7, "K_star": 2, "E_total_j": 0.2},
    ]
    plan_plots.plot_kstar_heatmap(
        tmp_path / "kstar_heatmap.png", best, [0.0, 30.0], [1e5, 1e7], scenario, [1, 2, 5, 10, 20]
    )
    fig = captured["kstar_heatmap.png"]
    bar = fig.axes[1]
    assert [t.get_text() for t in bar.get_yticklabels()] == ["1", "2", "5", "10", "20"]
    assert fig.axes[0].get_title().endswith("scenario default-theory · algorithm fedavg")
    rounds = {2: 40, 5: 20, 20: 12}
    cells = [
        {"snr_db": 0.0, "bandwidth_hz": 1e5, "x": 50.0, "K_star": 20},
        {"snr_db": 30.0, "bandwidth_hz": 1e7, "x": 0.5, "K_star": 2},
    ]
    segments = [(0.0, 1.0, 2), (1.0, 10.0, 5), (10.0, math.inf, 20)]
    plan_plots.plot_kstar_breakeven(
        tmp_path / "kstar_breakeven.png", rounds, segments, cells, [0.0, 30.0], [1e5, 1e7], scenario
    )
    ax = captured["kstar_breakeven.png"].axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["2", "5", "20"]
    assert ax.yaxis.get_minor_locator().tick_values(1, 100) == []
