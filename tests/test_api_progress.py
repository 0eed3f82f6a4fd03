"""The API in a notebook (issue 22): run, sweep and plan show rich's progress in Jupyter by
default, nothing in a script, nothing anywhere with quiet=True; to_pandas names its extra."""

import io
import sys

import pytest
import rich
from rich.console import Console

import fedjoule
from fedjoule.api_views import Display
from fedjoule.results import _frame

TINY = {"training.rounds": 3, "population.size": 10, "round.min_clients": 1}


def notebook() -> Console:
    return Console(force_jupyter=True, record=True, width=120)


def script() -> Console:
    return Console(force_jupyter=False, force_terminal=False, file=io.StringIO())


def terminal() -> Console:
    return Console(force_jupyter=False, force_terminal=True, file=io.StringIO())


def test_progress_is_shown_by_default_in_a_notebook_and_on_a_terminal():
    assert (Display(None, notebook()).live, Display(None, script()).shown) == (True, False)
    assert Display(None, terminal()).live  # stderr a terminal: the live bars
    assert not Display(True, terminal()).shown
    assert not Display(True, notebook()).shown  # quiet=True: nothing, even in a notebook
    on_stderr = Display(False, script())  # quiet=False in a script: lines on stderr
    assert on_stderr.shown and not on_stderr.live
    assert Display(False, notebook()).live


@pytest.mark.filterwarnings('ignore:install "ipywidgets"')  # (live bars need ipywidgets)
def test_a_run_in_a_notebook_shows_its_rounds_and_messages(tmp_path, monkeypatch):
    console = notebook()
    monkeypatch.setattr(rich, "_console", console)  # rich.get_console(): "in a notebook"
    rows = []
    result = fedjoule.run("default-theory", tmp_path / "a", overrides=TINY, on_round=rows.append)
    said = console.export_text()
    assert f"results in {tmp_path / 'a'}" in said and "from round 1 of 3" in said
    assert "note: energy model: device classes phone, iot use the radiated" in said
    # the bar the run drew, fed the same rows: its rounds and the last round's figures
    display = Display(None, console)
    display.start_run("default-theory", 3, 0)
    for row in rows:
        display.round_done(row, 3)
    task = display.progress.tasks[0]
    assert (task.completed, task.total) == (3, 3) == (len(result.rounds), 3)
    last = result.rounds[-1]
    assert task.fields["status"].startswith(
        f"sim {last['sim_time_end_s']:.1f} s  {last['cumulative_energy_j']:.3g} J"
    )
    # quiet=True: nothing shown in the notebook
    display = Display(True, console)
    display.say("not shown")
    assert console.export_text() == ""


def test_to_pandas_names_its_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)  # (as if not installed)
    with pytest.raises(ImportError, match=r"pip install 'fedjoule\[pandas\]'"):
        _frame([{"a": 1}], "RunResult")


def test_a_script_on_a_terminal_shows_the_rounds_on_stderr(tmp_path):
    """A real script whose stderr is a terminal (a pty): fedjoule.run draws its bar there
    without being asked; stdout stays clean."""
    import os
    import pty
    import subprocess

    script = (
        "import fedjoule\n"
        f"fedjoule.run('default-theory', {str(tmp_path / 'a')!r}, overrides={TINY!r},"
        " device='cpu')\n"
    )
    primary, secondary = pty.openpty()
    env = {**os.environ, "COLUMNS": "120", "TERM": "xterm"}
    child = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=secondary, env=env
    )
    os.close(secondary)  # (read while it writes: a full pty would block it)
    said = b""
    while True:
        try:
            chunk = os.read(primary, 65536)
        except OSError:  # the child closed its end: all read
            break
        if not chunk:
            break
        said += chunk
    os.close(primary)
    stdout = child.stdout.read()
    assert child.wait(timeout=120) == 0 and stdout == b""
    text = said.decode("utf-8", "replace")
    assert "3/3" in text and f"results in {tmp_path / 'a'}" in text.replace("\r\n", "")
