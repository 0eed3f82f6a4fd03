"""The options the command line lists: each algorithm's (`fedjoule algorithms`: built in,
installed by packages, or a plug-in class) and every scenario field's (`fedjoule
reference`, Markdown). Loading the algorithm classes imports torch, so the command line
imports this module only when such a command runs."""

from rich.console import Console
from rich.table import Table
from rich.text import Text

from fedjoule.algorithms.registry import CUSTOM, check_algorithm_class, names
from fedjoule.errors import FedjouleError
from fedjoule.plugins import REGISTRY, PluginError, entry_target, load_spec
from fedjoule.scenarios.reference import _allowed, _default, _type_name, reference_markdown

__all__ = ["print_algorithms", "reference_markdown"]


def print_algorithms(console: Console, name: str | None) -> bool:
    """Every algorithm a scenario can name with its options (name None), or one: a name,
    custom, or a plug-in class file.py:ClassName. False when the one asked for is an
    installed algorithm that fails to load; FedjouleError for an unknown name."""
    entries = REGISTRY.entries("algorithm")
    if name is None:
        for entry in entries.values():
            print_algorithm(console, entry.name, entry.origin, *algorithm_of(entry))
        print_custom(console)
        return True
    if name == CUSTOM:
        print_custom(console)
    elif name in entries:
        entry = entries[name]
        cls, problem = algorithm_of(entry)
        print_algorithm(console, name, entry.origin, cls, problem)
        return problem is None
    elif ":" in name:  # a plug-in class, as `class:` of a custom algorithm names it
        try:
            cls, source = load_spec(name)
            check_algorithm_class(cls, name)
        except PluginError as exc:
            raise FedjouleError(str(exc)) from None
        where = source.get("file") or source.get("module")
        sha = f", SHA-256 {source['sha256'][:12]}..." if source.get("sha256") else ""
        print_algorithm(console, name, f"custom class from {where}{sha}", cls, None)
    else:
        raise FedjouleError(
            f"unknown algorithm {name!r}; available: {', '.join(names())} "
            "(or a plug-in class file.py:ClassName)"
        )
    return True


CUSTOM_USAGE = (
    'algorithm: {name: custom, class: "file.py:ClassName", options: {...}}',
    "class: a Python file (looked for next to the scenario file, then in the working "
    "folder) or an importable module, 'package.module:ClassName'; the class subclasses "
    "fedjoule.algorithms.base.Algorithm and its config_class (an AlgorithmConfig) checks "
    "options.",
    "scenario.yaml records the file's path and SHA-256; --resume refuses a file that "
    "changed since.",
    "fedjoule algorithms file.py:ClassName shows its options.",
)


def algorithm_of(entry) -> tuple[type | None, str | None]:
    """An entry's algorithm class, or None and why it cannot be used (an installed
    package that fails to import or names no Algorithm)."""
    try:
        cls, _ = entry_target(entry)
        return check_algorithm_class(cls, f"{entry.name} ({entry.origin})"), None
    except Exception as exc:  # a broken package is shown as such, not as a traceback
        return None, str(exc) or type(exc).__name__


def option_rows(config) -> list[tuple[str, str, str, str, str]]:
    """(option, type, allowed, default, meaning) of each field of an options model."""

    def plain(text: str) -> str:  # the reference's Markdown as terminal text
        return text.replace(" \\| ", " | ").replace("`", "")

    return [
        (
            info.alias or key,  # as a scenario writes it
            plain(_type_name(info.annotation)),
            plain(_allowed(info.annotation, info.metadata)),
            plain(_default(info)),
            info.description or "",
        )
        for key, info in config.model_fields.items()
        if key != "name"
    ]


def print_algorithm(console: Console, name: str, origin: str, cls, problem: str | None) -> None:
    console.print(Text.assemble(Text(name, style="bold"), f"  ({origin})"), soft_wrap=True)
    if problem is not None:
        console.print(Text.assemble("  ", ("broken:", "bold red"), " ", problem), soft_wrap=True)
        console.print()
        return
    summary = (cls.__doc__ or "").strip().splitlines()
    if summary:
        console.print(f"  {summary[0]}", soft_wrap=True)
    rows = option_rows(cls.config_class)
    if not rows:
        console.print("  no options")
    else:
        table = Table(show_header=True, box=None, padding=(0, 1, 0, 2))
        for column in ("option", "type", "allowed", "default", "meaning"):
            table.add_column(column, overflow="fold")
        for row in rows:
            table.add_row(*(Text(cell) for cell in row))
        console.print(table)
    console.print()


def print_custom(console: Console) -> None:
    console.print(
        Text.assemble(
            Text("custom", style="bold"), "  (a plug-in class from a Python file or module)"
        ),
        soft_wrap=True,
    )
    for line in CUSTOM_USAGE:
        console.print(f"  {line}", soft_wrap=True)
