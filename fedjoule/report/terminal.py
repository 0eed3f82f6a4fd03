"""Tables for the terminal that never cut a value: each column is as wide as its cells need,
a cell is broken only between its units (words, or a figure and its "± CI"), never inside
one; where the boxed table is wider than the terminal, a compact layout (no vertical
rules, one space between columns), and where even that is too wide, the table in parts,
each repeating the key columns (the run's name or grid values).

Rich shrinks a table that is wider than the terminal by cutting its columns ("scaffo/ld",
"candida…"); FittedTable instead measures its cells at print time (the console's width,
`Console(width=...)` in tests) and gives rich widths that fit.
"""

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from rich import box
from rich.table import Table

Cell = str | tuple[str, ...]  # a text (broken at spaces) or its unbreakable units


# a text's unbreakable parts: "[lo, hi]", "(2.08 %)", "± 0.12", or a word
UNIT = re.compile(r"\[[^\]]*\]|\([^)]*\)|± \S+|\S+")


def units(cell: Cell) -> tuple[str, ...]:
    """The parts of a cell that are never broken: a text's words (an interval "[0, 1]", a
    bracket "(2 %)" and "± 0.1" each one part), or the units given."""
    if isinstance(cell, tuple):
        return tuple(u for u in cell if u) or ("",)
    return tuple(UNIT.findall(str(cell))) or ("",)


def one_line(cell: Cell) -> str:
    return " ".join(units(cell))


def wrap_units(parts: Sequence[str], width: int) -> str:
    """The units joined by spaces, a new line wherever the next would pass `width`."""
    lines: list[str] = []
    for part in parts:
        if lines and len(lines[-1]) + 1 + len(part) <= width:
            lines[-1] += " " + part
        else:
            lines.append(part)
    return "\n".join(lines)


@dataclass
class _Column:
    header: str
    justify: str = "left"
    cells: list[Cell] = field(default_factory=list)

    def least(self) -> int:
        """The narrowest width that breaks no unit (header words included)."""
        return max(len(u) for cell in [self.header, *self.cells] for u in units(cell))

    def most(self) -> int:
        """The width that puts every cell and the header on one line."""
        return max(len(one_line(cell)) for cell in [self.header, *self.cells])


def overhead(columns: int, compact: bool) -> int:
    """The characters a table adds to its columns' contents: boxed, each column's padding
    (1 + 1) and rule and the closing rule; compact, two spaces between columns."""
    return 2 * (columns - 1) if compact else 3 * columns + 1


class FittedTable:
    """A rich renderable table that fits the console's width without cutting a value
    (module docstring). `keys`: how many leading columns name a row (repeated in every
    part when the table must be split)."""

    def __init__(self, title: str | None = None, keys: int = 1):
        self.title = title
        self.keys = keys
        self.columns: list[_Column] = []
        self.row_count = 0

    def add_column(self, header: str, justify: str = "left") -> None:
        self.columns.append(_Column(header, justify))

    def add_row(self, *cells: Cell) -> None:
        for column, cell in zip(self.columns, cells, strict=True):
            column.cells.append(cell)
        self.row_count += 1

    # ---------------------------------------------------------------- layout
    @staticmethod
    def widths(columns: list[_Column], room: int, compact: bool = False) -> list[int] | None:
        """Column widths (contents only) that fit `room` characters, each at least its
        least width and at most what puts it on one line, the spare room shared by need;
        None when even the least widths do not fit."""
        least = [c.least() for c in columns]
        most = [c.most() for c in columns]
        free = room - overhead(len(columns), compact)
        if sum(least) > free:
            return None
        widths, spare = list(least), free - sum(least)
        cells = [max([c.least(), *(len(one_line(x)) for x in c.cells)]) for c in columns]
        for goal in (cells, most):  # the cells on one line first, then the headers
            wanting = [max(g - w, 0) for g, w in zip(goal, widths, strict=True)]
            while spare > 0 and any(wanting):
                share = max(spare // sum(1 for w in wanting if w > 0), 1)
                for i, want in enumerate(wanting):
                    give = min(want, share, spare)
                    widths[i] += give
                    wanting[i] -= give
                    spare -= give
                    if spare == 0:
                        break
        return widths

    def parts(self, room: int) -> tuple[bool, list[tuple[list[_Column], list[int]]]]:
        """(compact, the table's parts) for a console `room` characters wide: one boxed
        part where all columns fit so, else one compact part, else compact parts of the
        key columns with as many others as fit."""
        for compact in (False, True):
            whole = self.widths(self.columns, room, compact)
            if whole is not None:
                return compact, [(self.columns, whole)]
        keys, rest = self.columns[: self.keys], self.columns[self.keys :]
        parts, current = [], []
        for column in rest:
            if current and self.widths(keys + current + [column], room, True) is None:
                parts.append(current)
                current = []
            current.append(column)
        if current:
            parts.append(current)
        laid = []
        for part in parts:
            columns = keys + part
            widths = self.widths(columns, room, True)
            if widths is None:  # not even one column beside the keys: each at its least
                widths = [c.least() for c in columns]
            laid.append((columns, widths))
        return True, laid

    def table(
        self, columns: list[_Column], widths: list[int], title: str | None, compact: bool
    ) -> Table:
        options = {}
        if compact:
            options = dict(
                box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True
            )
        table = Table(title=title, **options)
        for column, width in zip(columns, widths, strict=True):
            header = wrap_units(units(column.header), width)
            table.add_column(header, justify=column.justify, width=width, no_wrap=True)
        for r in range(self.row_count):
            table.add_row(
                *(wrap_units(units(c.cells[r]), w) for c, w in zip(columns, widths, strict=True))
            )
        return table

    def __rich_console__(self, console, options):
        compact, laid = self.parts(options.max_width)
        for i, (columns, widths) in enumerate(laid):
            title = self.title
            if len(laid) > 1:
                title = f"{self.title or 'table'} ({i + 1}/{len(laid)})"
            yield self.table(columns, widths, title, compact)
