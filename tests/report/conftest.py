"""Fixtures of the report tests."""

from pathlib import Path

import pytest

from fedjoule.report import figures


@pytest.fixture
def captured(monkeypatch):
    """Every figure saved through figures.save_plot, by file name (still written)."""
    figs: dict[str, object] = {}
    original = figures.save_plot

    def keep(fig, path, *args, **kwargs):
        figs[Path(path).name] = fig
        return original(fig, path, *args, **kwargs)

    monkeypatch.setattr(figures, "save_plot", keep)
    return figs
