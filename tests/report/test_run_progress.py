"""The progress of many runs: each run's rounds read from its rounds.csv, a finished run
counted at its cap (it may stop early at its target), the total over all runs."""

from pathlib import Path
from types import SimpleNamespace

from rich.console import Console

from fedjoule.run_progress import RunsProgress, many_runs_progress, rounds_written


def point(name: str, rounds: int):
    return SimpleNamespace(
        name=name, scenario=SimpleNamespace(training=SimpleNamespace(rounds=rounds))
    )


def write_rounds(folder: Path, n: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "scenario.yaml").write_text("name: x\n")
    (folder / "rounds.csv").write_text("round,x\n" + "".join(f"{r},0\n" for r in range(n)))


def test_rounds_are_read_from_the_run_folders(tmp_path):
    assert rounds_written(tmp_path / "missing") == 0
    folders = {"a": tmp_path / "runs" / "a", "b": tmp_path / "runs" / "b", "c": tmp_path / "c"}
    points = [point("a", 10), point("b", 20), point("c", 5)]
    progress = many_runs_progress(Console(file=open(tmp_path / "out.txt", "w")), quiet=True)
    with RunsProgress(progress) as watch:
        total = progress.tasks[0]
        assert total.total is None  # shown before the grid is known
        watch.on_plan(points, {"a": "new", "b": "new", "c": "done"}, folders)
        write_rounds(folders["a"], 4)
        write_rounds(folders["b"], 25)  # more lines than the cap count as the cap
        watch._refresh()
        assert (total.total, total.completed) == (35, 4 + 20 + 5)
        # one bar per run in flight, named <sweep folder>/<run>
        named = {f"{tmp_path.name}/a", f"{tmp_path.name}/b"}
        assert {t.description.strip() for t in progress.tasks[1:]} == named
        watch.on_run("a", "ran")  # stopped at its target after 4 rounds: complete
        assert total.completed == 10 + 20 + 5
        assert "(2/3 runs done)" in total.description
        assert {t.description.strip() for t in progress.tasks[1:]} == {f"{tmp_path.name}/b"}
