"""The plots' settings, light to import (no matplotlib until a style is applied): the
formats every plot is saved in and the style it is drawn in, each mirrored in an
environment variable (FEDJOULE_PLOT_FORMATS, FEDJOULE_PLOT_STYLE) so that the processes
a local sweep spawns for its runs draw the same. report/figures.py draws with them and
re-exports them (docs/plots.md)."""

import os
from collections.abc import Iterable
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

from fedjoule.errors import FedjouleError


def _matplotlib() -> ModuleType:
    """matplotlib with its style module, for a style file's check and a style's settings."""
    # deferred: matplotlib (0.3 s; the commands given the default style draw without it)
    import matplotlib.style

    return matplotlib


ALLOWED_FORMATS = ("png", "pdf", "svg")
FORMATS_ENV = "FEDJOULE_PLOT_FORMATS"


def check_formats(formats: Iterable[str] | str) -> tuple[str, ...]:
    """The formats asked for, validated, lower-case, PNG first (PNG is always written)."""
    if isinstance(formats, str):
        formats = formats.split(",")
    asked = [str(f).strip().lower().lstrip(".") for f in formats]
    asked = [f for f in asked if f]
    bad = [f for f in asked if f not in ALLOWED_FORMATS]
    if bad:
        raise FedjouleError(
            f"plot format {bad[0]!r} is not supported; expected one or more of "
            f"{', '.join(ALLOWED_FORMATS)}"
        )
    return tuple(f for f in ALLOWED_FORMATS if f == "png" or f in asked)


def _from_environment() -> tuple[str, ...]:
    text = os.environ.get(FORMATS_ENV, "")
    return check_formats(text) if text.strip() else ("png",)


# the formats every plot is written in (png always; pdf, svg on request)
PLOT_FORMATS: tuple[str, ...] = ("png",)


def set_plot_formats(formats: Iterable[str] | str) -> tuple[str, ...]:
    """Write every plot in `formats` from now on (png is always among them); returns the
    setting it replaces. An unknown format is a FedjouleError naming it."""
    global PLOT_FORMATS
    new = check_formats(formats)
    old = PLOT_FORMATS
    PLOT_FORMATS = new
    os.environ[FORMATS_ENV] = ",".join(new)
    return old


def current_formats() -> tuple[str, ...]:
    """The formats plots are written in: the setting, or what the environment says (a
    process spawned by one that set them)."""
    if PLOT_FORMATS != ("png",):
        return PLOT_FORMATS
    return _from_environment()


@contextmanager
def plot_formats(formats: Iterable[str] | str):
    """`with plot_formats(["png", "pdf"]):` plots written inside are also written as PDF."""
    had_env = os.environ.get(FORMATS_ENV)
    old = set_plot_formats(formats)
    try:
        yield PLOT_FORMATS
    finally:
        set_plot_formats(old)
        if had_env is None:
            os.environ.pop(FORMATS_ENV, None)
        else:
            os.environ[FORMATS_ENV] = had_env


# ---------------------------------------------------------------- styles

STYLE_ENV = "FEDJOULE_PLOT_STYLE"
PAPER = "paper"
STYLE_DIR = Path(__file__).parent / "styles"
PAPER_STYLE_FILE = STYLE_DIR / "paper.mplstyle"

PLOT_STYLE: str | None = None  # None: the default look; "paper"; or a .mplstyle file


def check_style(style, option: str = "--plot-style") -> str | None:
    """The style asked for: None (or "default"), "paper", or an existing matplotlib style
    file (FILE.mplstyle) that matplotlib can read; else a FedjouleError naming it."""
    if style is None:
        return None
    if not isinstance(style, str | os.PathLike):
        raise FedjouleError(f"{option}={style!r}: expected paper, default or a .mplstyle file")
    text = os.fspath(style).strip()
    if text in ("", "default"):
        return None
    if text == PAPER:
        return PAPER
    path = Path(text)
    if path.suffix != ".mplstyle" or not path.is_file():
        raise FedjouleError(
            f"{option} {text!r}: expected paper, default or an existing matplotlib style "
            "file FILE.mplstyle"
        )
    try:
        _matplotlib().rc_params_from_file(str(path), use_default_template=False)
    except Exception as exc:  # a file matplotlib cannot read
        raise FedjouleError(f"{option} {text!r}: not a matplotlib style file ({exc})") from None
    return str(path.resolve())


def _style_file(style: str | None) -> str | None:
    return str(PAPER_STYLE_FILE) if style == PAPER else style


_BASE_RC = None  # the settings before the first style was applied (restored by None)


def _apply_style(style: str | None) -> None:
    global _BASE_RC
    if _BASE_RC is None:
        if style is None:
            return
        _BASE_RC = {k: v for k, v in _matplotlib().rcParams.items() if k != "backend"}
    _matplotlib().rcParams.update(_BASE_RC)
    if style is not None:
        _matplotlib().style.use(_style_file(style))


def set_plot_style(style) -> str | None:
    """Draw every plot in `style` from now on (None: the default); returns the setting it
    replaces."""
    global PLOT_STYLE
    new = check_style(style)
    old = PLOT_STYLE
    PLOT_STYLE = new
    if new is None:
        os.environ.pop(STYLE_ENV, None)
    else:
        os.environ[STYLE_ENV] = new
    _apply_style(new)
    return old


def current_style() -> str | None:
    """The style plots are drawn in: the setting, or what the environment says (a process
    spawned by one that set it)."""
    if PLOT_STYLE is None and os.environ.get(STYLE_ENV):
        set_plot_style(os.environ[STYLE_ENV])
    return PLOT_STYLE


@contextmanager
def plot_style(style):
    """`with plot_style("paper"):` plots drawn inside are in that style."""
    had_env = os.environ.get(STYLE_ENV)
    old = set_plot_style(style)
    try:
        yield PLOT_STYLE
    finally:
        set_plot_style(old)
        if had_env is not None:
            os.environ[STYLE_ENV] = had_env
