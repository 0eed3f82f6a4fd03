"""The command line's options that several commands share (flag, help text, limits),
and the parser of an --out folder."""

from pathlib import Path
from typing import Annotated

import typer

from fedjoule import arguments


def output_folder(text: str) -> Path:
    """An --out value: a path, never the empty string (which would mean the working
    folder unasked); the folder itself is checked by folders.check_out_folder."""
    if not text.strip():
        raise typer.BadParameter("an empty path; give the output folder's path")
    return Path(text)


SetOption = Annotated[
    list[str] | None,
    typer.Option("--set", "-s", help="Override a scenario field: dotted.key=value (repeatable)."),
]
AllowModulesOption = Annotated[
    list[str] | None,
    typer.Option(
        "--allow-module-plugins",
        help="Let the scenario name module plug-ins (package.module:name) of this top-level "
        "package; comma-separated or repeated. Never the standard library.",
    ),
]
AllowPathOption = Annotated[
    list[Path] | None,
    typer.Option(
        "--allow-plugin-path",
        help="Let the scenario name plug-in files inside this folder, besides its own "
        "folder (repeatable).",
    ),
]
DataDirOption = Annotated[
    Path | None,
    typer.Option(help="Dataset folder (default $FEDJOULE_DATA_DIR, else a user cache)."),
]
# the options of commands that run many scenarios (sweep, plan): planning.sweep.SweepOptions
BackendOption = Annotated[
    str, typer.Option(help="Where runs execute: local (a process pool on this machine) or ray.")
]
AddressOption = Annotated[
    str | None,
    typer.Option(help="Ray cluster address (--backend ray); default: start a local Ray."),
]
WorkersOption = Annotated[
    int | None,
    typer.Option(
        min=1,
        max=arguments.MAX_WORKERS,
        help="Runs at once (default: local, cores // threads-per-run; ray, as many as the "
        "cluster's resources allow).",
    ),
]
ThreadsPerRunOption = Annotated[
    int,
    typer.Option(
        min=1,
        max=arguments.MAX_THREADS,
        help="Torch threads (and Ray CPUs) per run. Results are bit-identical across "
        "backends and restarts for the same value.",
    ),
]
ManyDeviceOption = Annotated[
    str,
    typer.Option(
        help="auto (CUDA if present), cpu or cuda; with ray, each run asks for one GPU "
        "when cuda (auto: when the cluster has GPUs)."
    ),
]
PlotFormatOption = Annotated[
    str,
    typer.Option(
        "--plot-format",
        help="Plot formats, comma-separated: png (always written), pdf, svg; e.g. png,pdf "
        "writes every plot also as PDF beside its PNG.",
    ),
]
PlotStyleOption = Annotated[
    str | None,
    typer.Option(
        "--plot-style",
        help="paper: no titles, 3.5 in wide (one column of a two-column paper), 8 pt axis "
        "labels and 7 pt tick labels and legends; or a matplotlib style file FILE.mplstyle "
        "(its font sizes, and its figure width where it sets figure.figsize).",
    ),
]
CiOption = Annotated[
    str,
    typer.Option(
        "--ci",
        help="The 95 % CI over seeds: t (Student t, default) or bootstrap (percentile, "
        "2000 resamples, seeded); clipped to each figure's physical range (docs/seeds.md).",
    ),
]
TrackOption = Annotated[
    str | None,
    typer.Option(
        "--track",
        help="Experiment tracking, comma-separated: tensorboard, mlflow (a local file store), "
        "wandb (offline), csv, or a plug-in 'file.py:ClassName' (sets the scenario's "
        "tracking.backends; docs/tracking.md).",
    ),
]
SeedsOption = Annotated[
    str | None,
    typer.Option(
        help="Repeat over seeds: N (seeds 0..N-1) or a list 3,7,11. One run folder per seed "
        "and aggregate.csv/json with <field>_mean, _std and _ci95 (95 % Student-t CI over "
        "seeds) of every summary figure (docs/seeds.md).",
    ),
]


ScenarioArgument = Annotated[str, typer.Argument(help="A built-in scenario name or a YAML file.")]
RunOutOption = Annotated[
    Path | None,
    typer.Option(parser=output_folder, help="Output folder (default runs/<name>-<time>)."),
]
RunDeviceOption = Annotated[str, typer.Option(help="auto (CUDA if present), cpu or cuda.")]
ExecutorOption = Annotated[
    str,
    typer.Option(
        help="vectorised (all clients at once; hand-batched for dense models), vmap "
        "(plain torch.func vmap, for comparison), compiled (vmap through "
        "torch.compile: slow to start, for GPUs) or sequential (the reference)."
    ),
]
ResumeOption = Annotated[
    bool, typer.Option("--resume", help="Continue the interrupted run in --out.")
]
ThreadsOption = Annotated[
    int | None,
    typer.Option(
        min=1,
        max=arguments.MAX_THREADS,
        help="CPU threads for torch (default: one when a local step of the round's "
        "clients is under 1e7 forward FLOPs, else all cores; waiting threads sleep "
        "after 300 spins, GOMP_SPINCOUNT). Results are bit-identical for the same count.",
    ),
]
StateMemoryOption = Annotated[
    float,
    typer.Option(
        min=0,
        max=arguments.MAX_MEMORY_MB,
        help="Client state (SCAFFOLD c_i, FedDyn g_i, ...) kept in memory; beyond it rows "
        "spill to client_state.bin in the run folder.",
    ),
]
QuietOption = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")]
NoTrainOption = Annotated[
    bool,
    typer.Option(
        "--no-train",
        help="System only: availability, selection, channel, time and energy without "
        "data or training (numpy engine, millions of devices; docs/system-engine.md).",
    ),
]
EngineOption = Annotated[
    str,
    typer.Option(
        help="With --no-train: auto (numpy, or SimPy where numpy cannot), numpy, or simpy "
        "(the SimPy engine with training skipped)."
    ),
]


ParetoAccuracy = Annotated[
    str,
    typer.Option(
        help="Accuracy of the Pareto fronts: final_accuracy, best_accuracy, "
        "worst_client_accuracy or client_accuracy_p10."
    ),
]
ParetoToTarget = Annotated[
    bool,
    typer.Option(
        "--pareto-to-target",
        help="Fronts over energy and time to the target (runs that never reach it are left "
        "out) instead of the totals.",
    ),
]


PlanScenarioArgument = Annotated[
    str, typer.Argument(help="A built-in scenario name or a YAML file (with a target).")
]
KOption = Annotated[str, typer.Option("--k", help="Local steps K to compare, comma-separated.")]
SnrOption = Annotated[
    str, typer.Option(help="SNR grid (dB), set as channel.snr_db, comma-separated.")
]
BandwidthOption = Annotated[
    str,
    typer.Option(help="Uplink bandwidth grid (Hz), channel.uplink_bandwidth_hz, comma-separated."),
]
MaxRoundsOption = Annotated[
    int | None,
    typer.Option(
        min=1,
        max=arguments.MAX_ROUNDS,
        help="Rounds cap of every learning run (default the scenario's training.rounds); "
        "a K that has not reached the target by then is reported as not reached.",
    ),
]
CellsOption = Annotated[
    str | None,
    typer.Option(help="Cells drawn in energy_vs_k.png: SNR:BW,... (default: the grid's corners)."),
]
PerCellOption = Annotated[
    bool,
    typer.Option(
        "--per-cell",
        help="Run every (K, cell) as its own learning run even where one run per K "
        "could price the grid (a check of the repricing; slower).",
    ),
]
PlanOutOption = Annotated[
    Path | None,
    typer.Option(
        parser=output_folder,
        help="Plan folder (default plans/<name>-<time>); give it again to resume the "
        "learning runs of an interrupted plan.",
    ),
]
BarsQuietOption = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars.")]
