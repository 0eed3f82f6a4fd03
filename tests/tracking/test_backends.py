"""One tiny run tracked by all four backends, read back through each library's own reader
(TensorBoard's EventAccumulator, MlflowClient on the file store, the W&B offline run file
as wandb's protobuf records, the csv files) and compared with the run's own files:
rounds.csv per round, scenario.yaml as hyper-parameters, summary.json, the plots. The
tracked run's results equal those of the same run untracked."""

import csv
from pathlib import Path

import matplotlib.image
import numpy as np
import pytest

import fedjoule
from tests.tracking.common import (
    PLOTS,
    TINY,
    mlflow_client,
    numeric,
    rounds,
    same,
    scenario_params,
    summary_numbers,
    texts,
)
from tests.tracking.wandb_records import offline_run

pytest.importorskip("tensorboard")
pytest.importorskip("mlflow")
pytest.importorskip("wandb")


@pytest.fixture(scope="module")
def tracked(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("tracked") / "run"
    fedjoule.run(
        "default-theory", out, overrides=TINY, device="cpu", track="csv,tensorboard,mlflow,wandb"
    )
    return out


def test_results_equal_an_untracked_run(tracked, tmp_path):
    plain = fedjoule.run("default-theory", tmp_path / "plain", overrides=TINY, device="cpu")
    ours, theirs = rounds(tracked), rounds(plain.folder)
    for row in [*ours, *theirs]:
        del row["wall_time_s"]
    assert ours == theirs and len(ours) == 3
    assert (tracked / "clients.csv").read_bytes() == (plain.folder / "clients.csv").read_bytes()
    assert not any((plain.folder / name).exists() for name in ("tracking", "tracking.json"))


def test_csv(tracked):
    run = tracked / "tracking" / "csv" / "run"
    with (run / "metrics.csv").open(newline="") as f:
        logged = {(int(r["step"]), r["name"]): r["value"] for r in csv.DictReader(f)}
    rows = rounds(tracked)
    columns, words = numeric(rows), texts(rows)
    expected = {(r, c): v for c, by_round in columns.items() for r, v in by_round.items()}
    expected.update({(r, c): v for c, by_round in words.items() for r, v in by_round.items()})
    assert logged.keys() == expected.keys()  # every non-empty cell of every round
    for key, value in expected.items():
        assert same(float(logged[key]), value) if key[1] not in words else logged[key] == value
    with (run / "params.csv").open(newline="") as f:
        params = {r["name"]: r["value"] for r in csv.DictReader(f)}
    assert params == {k: "" if v is None else str(v) for k, v in scenario_params(tracked).items()}
    with (run / "summary.csv").open(newline="") as f:
        summary = {r["name"]: float(r["value"]) for r in csv.DictReader(f)}
    assert summary.keys() == summary_numbers(tracked).keys()
    assert all(same(summary[k], v) for k, v in summary_numbers(tracked).items())
    for plot in PLOTS:
        copied = (run / "artifacts" / f"{plot}.png").read_bytes()
        assert copied == (tracked / f"{plot}.png").read_bytes()


def test_tensorboard(tracked):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import plugin_data_pb2

    events = EventAccumulator(str(tracked / "tracking" / "tensorboard" / "run"), size_guidance={})
    events.Reload()
    tags = events.Tags()
    columns = numeric(rounds(tracked))
    assert {t.removeprefix("rounds/") for t in tags["scalars"] if t.startswith("rounds/")} == set(
        columns
    )
    for column, by_round in columns.items():
        logged = {e.step: e.value for e in events.Scalars(f"rounds/{column}")}
        # TensorBoard stores 32-bit floats: the value is rounds.csv's, rounded to float32
        expected = {r: float(np.float32(v)) for r, v in by_round.items()}
        assert logged.keys() == expected.keys(), column
        assert all(same(logged[r], expected[r]) for r in expected), column
    for key, value in summary_numbers(tracked).items():
        (event,) = events.Scalars(f"summary/{key}")
        assert same(event.value, float(np.float32(value)))
    for plot in PLOTS:
        (image,) = events.Images(f"plots/{plot}")
        height, width = matplotlib.image.imread(tracked / f"{plot}.png").shape[:2]
        assert (image.height, image.width) == (height, width)
    for column, by_round in texts(rounds(tracked)).items():
        logged = events.Tensors(f"rounds/{column}/text_summary")
        assert {e.step: e.tensor_proto.string_val[0].decode() for e in logged} == by_round
    content = events.PluginTagToContent("hparams")["_hparams_/session_start_info"]
    start = plugin_data_pb2.HParamsPluginData.FromString(content).session_start_info
    hparams = {}
    for key, value in start.hparams.items():
        kind = value.WhichOneof("kind")
        hparams[key] = getattr(value, kind)
    expected = scenario_params(tracked)
    assert hparams.keys() == expected.keys()
    for key, value in expected.items():
        if isinstance(value, int | float):  # (torch's writer stores a bool as 1 or 0)
            assert hparams[key] == value, key
        else:
            assert hparams[key] == str(value), key


def test_mlflow(tracked):
    client = mlflow_client(tracked / "tracking" / "mlruns")
    experiment = client.get_experiment_by_name("default-theory")
    (run,) = client.search_runs([experiment.experiment_id])
    assert run.info.run_name == "run" and run.info.status == "FINISHED"
    expected = {k: "null" if v is None else str(v) for k, v in scenario_params(tracked).items()}
    assert run.data.params == expected
    columns = numeric(rounds(tracked))
    for column, by_round in columns.items():
        history = client.get_metric_history(run.info.run_id, column)
        logged = {m.step: m.value for m in history}
        assert len(history) == len(logged) == len(by_round), column  # one value per round
        assert all(same(logged[r], v) for r, v in by_round.items()), column
    for key, value in summary_numbers(tracked).items():
        (metric,) = client.get_metric_history(run.info.run_id, f"summary/{key}")
        assert same(metric.value, value) and metric.step == 2
    listed = {a.path for a in client.list_artifacts(run.info.run_id, "plots")}
    assert listed == {f"plots/{p}.png" for p in PLOTS}


def test_wandb(tracked):
    (folder,) = (tracked / "tracking" / "wandb").glob("offline-run-*")
    run = offline_run(folder)
    assert run["run"].display_name == "run" and run["run"].project == "default-theory"
    config = {k: v for k, v in run["config"].items() if not k.startswith("_wandb")}
    assert config == scenario_params(tracked)
    history = run["history"]
    columns = numeric(rounds(tracked))
    for column, by_round in columns.items():
        logged = {step: values[column] for step, values in history.items() if column in values}
        assert logged.keys() == by_round.keys(), column
        assert all(same(float(logged[r]), v) for r, v in by_round.items()), column
    for column, by_round in texts(rounds(tracked)).items():
        assert {s: v[column] for s, v in history.items() if column in v} == by_round
    for key, value in summary_numbers(tracked).items():
        assert same(float(run["summary"][f"summary/{key}"]), value), key
    for plot in PLOTS:
        prefix = f"plots/{plot}."  # (W&B writes an image's fields as nested keys)
        image = {k[len(prefix) :]: v for k, v in history[2].items() if k.startswith(prefix)}
        height, width = matplotlib.image.imread(tracked / f"{plot}.png").shape[:2]
        assert image["_type"] == "image-file" and (image["height"], image["width"]) == (
            height,
            width,
        )
        assert (folder / "files" / image["path"]).is_file()
