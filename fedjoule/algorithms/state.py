"""The server state an algorithm keeps between rounds: a dataclass with the global model `w`.

Each algorithm declares its own fields in a small subclass (SCAFFOLD's control variate
c: `ScaffoldState(w, c)`), returns it from `init_state` and returns a new one from
`aggregate` (`dataclasses.replace(state, w=..., c=...)`: the old state is left as it was).

A state is also a read-only Mapping from names to values (`state["w"]`, `{**state}`,
`state.items()`), which is what a checkpoint stores (a plain dict of tensors, read back
with `torch.load(weights_only=True)`) and what plug-ins written against the older dict
states read. A field named after a Python keyword takes a trailing underscore (DRFA's
`lambda_`); its key drops it ("lambda"). A plug-in's `init_state` may still return a plain
dict (docs/writing-an-algorithm.md); the engine and the base class's defaults take either.
"""

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, fields, is_dataclass, replace
from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # torch stays unimported here (the commands that train nothing)
    import torch


@dataclass
class ServerState(Mapping):
    """FedAvg's server state, and the base of every algorithm's: the global model `w`,
    which fedjoule broadcasts, evaluates and checks for divergence."""

    w: "torch.Tensor"

    def __getitem__(self, key: str) -> Any:
        name = field_names(type(self)).get(key)
        if name is None:
            raise KeyError(key)
        return getattr(self, name)

    def __iter__(self) -> Iterator[str]:
        return iter(field_names(type(self)))

    def __len__(self) -> int:
        return len(field_names(type(self)))


@cache
def field_names(cls: type) -> dict[str, str]:
    """Key -> field name of a state class, in field order (a keyword's trailing _ dropped)."""
    return {f.name.removesuffix("_"): f.name for f in fields(cls)}


def updated(state: Mapping, **changes: Any) -> Mapping:
    """`state` with `changes` (by field name or key), as a new object of its kind: a typed
    state's dataclasses.replace, or a plug-in's plain dict copied (the older way)."""
    if is_dataclass(state):
        names = field_names(type(state))
        return replace(state, **{names.get(key, key): value for key, value in changes.items()})
    return {**state, **changes}


def restored(like: Mapping, saved: Mapping) -> Mapping:
    """A checkpoint's state (a plain dict, keys as the Mapping view gives them) in the
    kind of `like`, the run's state: a typed state when the names are its fields, else
    the dict as it was saved (a plug-in's dict state)."""
    if isinstance(like, ServerState):
        names = field_names(type(like))
        if set(saved) == set(names):
            return replace(like, **{names[key]: value for key, value in saved.items()})
    return dict(saved)
