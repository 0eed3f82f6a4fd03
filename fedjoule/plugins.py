"""One registry for what a scenario names: models, datasets, algorithms, trackers and
policies, built in, installed by another package (entry points), or given as a file or
module path.

A plug-in is named in a scenario by a spec, `file.py:name` (a Python file, relative to
the scenario file's folder, then to the working folder) or `package.module:name` (an
importable module). Loading it runs that Python code, exactly as running a script
would, so what a scenario file may name is bounded by what the user opted into
(`PluginTrust`; docs/plugins.md#plug-in-trust):

- a plug-in file is run only when it lies inside the scenario file's folder tree, or
  inside a folder the user allowed
  (`--allow-plugin-path DIR`, the API's `allow_plugin_paths`); links are resolved first;
- a module spec is imported only from a top-level package the user allowed
  (`--allow-module-plugins PKG`, the API's `allow_module_plugins`), never from the
  standard library; installed packages add names through entry points instead;
- `fedjoule validate` imports nothing: it checks every spec (form, file found and
  allowed, module allowed and installed, recorded SHA-256) and imports only with
  `--import-plugins`;
- `--resume` compares the folder's scenario.yaml with the checkpoint's SHA-256 before
  it reads the scenario, so an edited scenario.yaml never gets to name code.

Python code that builds scenario sections itself (not from a file) is not bounded: it
is already running code of its own choosing.

Every loaded plug-in has a *source*: the file's absolute path and the SHA-256 of its
content (for a module, of the module's file). Scenarios record it (scenario.yaml), so a
resumed run, a sweep's Ray worker or a colleague rebuilds the same run, and a plug-in
file that changed since is refused rather than silently used.
"""

import dataclasses
import hashlib
import importlib
import importlib.metadata
import importlib.util
import re
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fedjoule.errors import FedjouleError

# kind -> the entry-point group through which installed packages add names of that kind
# (models and datasets come from files or modules: name: custom, factory: ...)
ENTRY_POINT_GROUPS = {
    "algorithm": "fedjoule.algorithms",
    "tracker": "fedjoule.trackers",
    "policy": "fedjoule.policies",
}
# kind -> the module whose import registers the built-in names of that kind
_BUILTIN_MODULES = {
    "algorithm": "fedjoule.algorithms.registry",
    "model": "fedjoule.models",
    "dataset": "fedjoule.data.federated",
    "tracker": "fedjoule.tracking.registry",
    "policy": "fedjoule.policies.plugin",  # (no built-in names: policy.select's are fields)
}
ENTRY_POINT_ORIGIN = "entry point"  # an Entry's origin: read from an installed package
_MODULE_PATH = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


# what plug-in code may run (None: the unbounded default of Python callers); what the
# user allowed (command-line flags, API arguments)
_TRUST: ContextVar["PluginTrust | None"] = ContextVar("fedjoule_plugin_trust", default=None)
_ALLOWED: ContextVar["Allowance"] = ContextVar("fedjoule_plugin_allowed", default=None)


@dataclass(frozen=True)
class Allowance:
    """What the user opted into beyond a scenario's own folder: module packages, plug-in
    folders, and whether plug-in code may run at all (False: `validate` without
    --import-plugins)."""

    modules: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()
    run_code: bool = True

    def as_data(self) -> dict:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class PluginTrust:
    """The plug-ins a scenario read from a file may name: files inside `roots` (resolved),
    modules of the `modules` top-level packages (never the standard library); with
    `run_code` False their specs are checked without importing anything."""

    roots: tuple[Path, ...] | None  # None: a built-in scenario, any file (named by the user)
    modules: frozenset[str]
    run_code: bool = True

    def check_file(self, spec: str, path: Path) -> None:
        if self.roots is None:
            return
        real = Path(path).resolve()
        if any(real.is_relative_to(root) for root in self.roots):
            return
        shown = ", ".join(str(r) for r in self.roots) or "none"
        raise PluginError(
            f"{spec!r}: the plug-in file {real} is outside the scenario's folder ({shown}), "
            "so it is not run; move it beside the scenario, or allow its folder with "
            f"--allow-plugin-path {real.parent} (Python: allow_plugin_paths=[...])"
        )

    def check_module(self, spec: str, module: str) -> None:
        top = module.split(".")[0]
        if top in sys.stdlib_module_names or top in sys.builtin_module_names:
            raise PluginError(
                f"{spec!r}: {top!r} is part of Python's standard library, which a scenario "
                "never names as a plug-in; give a file or a module of your own package"
            )
        if top not in self.modules:
            raise PluginError(
                f"{spec!r}: a scenario names module plug-ins only from packages you allow, so "
                f"{module!r} is not imported; allow it with --allow-module-plugins {top} "
                "(Python: allow_module_plugins=[...]), or register it as an entry point"
            )


def allowance() -> Allowance:
    """What the user allowed in this context (nothing beyond the defaults if not said)."""
    return _ALLOWED.get() or Allowance()


def grant(modules: Iterable[str] = (), paths: Iterable[str | Path] = (), run_code: bool = True):
    """From here on in this context (a command's run), scenarios read from files may name
    module plug-ins of the `modules` packages and plug-in files inside `paths` (beside
    their own folder); `run_code` False: plug-in specs are checked without importing them.
    Returns the token that undoes it (ContextVar.reset)."""
    modules = list(modules)
    for name in modules:
        if not isinstance(name, str) or not _MODULE_PATH.match(name) or "." in name:
            raise PluginError(f"allowed module plug-ins: {name!r} is not a top-level package name")
    return _ALLOWED.set(
        Allowance(tuple(modules), tuple(str(Path(p).resolve()) for p in paths), run_code)
    )


def revoke(token) -> None:
    """Undo a `grant` (its token)."""
    _ALLOWED.reset(token)


@contextmanager
def allow_plugins(
    modules: Iterable[str] = (), paths: Iterable[str | Path] = (), run_code: bool = True
) -> Iterator[None]:
    """`grant` within this block."""
    token = grant(modules, paths, run_code)
    try:
        yield
    finally:
        _ALLOWED.reset(token)


@contextmanager
def scenario_trust(folder: str | Path | None) -> Iterator[None]:
    """Within this block plug-ins are bounded as for a scenario file in `folder` and what
    the user allowed. None: a built-in scenario, whose plug-in files can only come from
    the user's own overrides (--set, the API's overrides), so any file may be named."""
    given = allowance()
    roots = None
    if folder is not None:
        roots = (Path(folder).resolve(), *(Path(p) for p in given.paths))
    trust = PluginTrust(roots, frozenset(given.modules), given.run_code)
    token = _TRUST.set(trust)
    try:
        yield
    finally:
        _TRUST.reset(token)


def imports_plugins() -> bool:
    """Whether plug-in code runs in this context (False inside `validate`)."""
    trust = _TRUST.get()
    return trust is None or trust.run_code


class Unchecked:
    """What a spec stands for when plug-in code is not run (validate without
    --import-plugins): its name only."""

    def __init__(self, spec: str) -> None:
        self.spec = spec

    def __repr__(self) -> str:
        return f"<plug-in {self.spec} (not imported)>"


# the folders relative plug-in files are looked for in first (the scenario file's folder)
_BASE_DIRS: ContextVar[tuple[Path, ...]] = ContextVar("fedjoule_plugin_dirs", default=())


def plugin_dirs() -> tuple[Path, ...]:
    """Folders a relative plug-in file is looked for in, before the working folder."""
    return _BASE_DIRS.get()


@contextmanager
def relative_to(folder: str | Path | None) -> Iterator[None]:
    """Within this block relative plug-in files are looked for in `folder` first."""
    token = _BASE_DIRS.set(() if folder is None else (Path(folder),))
    try:
        yield
    finally:
        _BASE_DIRS.reset(token)


class PluginError(FedjouleError, ValueError):
    """A plug-in that cannot be found, loaded or used; the message says which and why.
    (Also a ValueError, so that scenario validation reports it at the field naming it.)"""


def require_subclass(cls: Any, base: type, where: str) -> None:
    """PluginError unless the loaded `cls` is a subclass of `base` (`where`: the spec or
    installed name it came from)."""
    if not (isinstance(cls, type) and issubclass(cls, base)):
        raise PluginError(
            f"{where} is {getattr(cls, '__name__', cls)!r}, not a subclass of "
            f"{base.__module__}.{base.__qualname__}"
        )


@dataclass(frozen=True)
class Entry:
    """One name a scenario can use: what it resolves to, and where that came from."""

    kind: str
    name: str
    target: Any  # a model factory, a dataset loader, an algorithm class (built in: "module:Class")
    origin: str  # "built in", or "entry point <group> from <distribution> <version>"


class Registry:
    """Names of every kind: built-ins register themselves; entry points are read once."""

    def __init__(self) -> None:
        self._entries: dict[str, dict[str, Entry]] = {kind: {} for kind in _BUILTIN_MODULES}
        self._installed_read: set[str] = set()

    def register(self, kind: str, name: str, target: Any, origin: str = "built in") -> None:
        self._entries[kind][name] = Entry(kind, name, target, origin)

    def entries(self, kind: str) -> dict[str, Entry]:
        """Every name of `kind`: the built-ins, then those installed packages add."""
        importlib.import_module(_BUILTIN_MODULES[kind])
        if kind not in self._installed_read and kind in ENTRY_POINT_GROUPS:
            self._installed_read.add(kind)
            self._read_entry_points(kind)
        return self._entries[kind]

    def get(self, kind: str, name: str) -> Entry | None:
        return self.entries(kind).get(name)

    def reload_installed(self) -> None:
        """Forget what entry points added, so that the next lookup reads them again (after
        a package was installed into the running interpreter)."""
        importlib.invalidate_caches()
        for kind in self._installed_read:
            self._entries[kind] = {
                n: e for n, e in self._entries[kind].items() if e.origin == "built in"
            }
        self._installed_read.clear()

    def _read_entry_points(self, kind: str) -> None:
        group = ENTRY_POINT_GROUPS[kind]
        for point in importlib.metadata.entry_points(group=group):
            if point.name in self._entries[kind]:
                continue  # a built-in name is never replaced
            dist = getattr(point, "dist", None)
            origin = f"{ENTRY_POINT_ORIGIN} {group}"
            if dist is not None:
                origin += f" from {dist.name} {dist.version}"
            self._entries[kind][point.name] = Entry(kind, point.name, point, origin)


REGISTRY = Registry()


def entry_target(entry: Entry) -> tuple[Any, dict]:
    """What an entry resolves to, and its source (path and hash of the code behind it).
    An entry point is loaded here, on first use, so that a broken package only matters to
    the scenarios that name it."""
    target = entry.target
    if isinstance(target, str):  # a built-in named by "module:name", imported on first use
        module, _, name = target.partition(":")
        return getattr(importlib.import_module(module), name), {}
    # (not isinstance(importlib.metadata.EntryPoint): once the importlib_metadata backport
    # is imported, as MLflow and W&B do, its finder hands out its own EntryPoint class)
    if entry.origin.startswith(ENTRY_POINT_ORIGIN):
        try:
            target = target.load()
        except Exception as exc:  # the package's own import error, reported with its name
            raise PluginError(
                f"{entry.kind} {entry.name!r} ({entry.origin}, {target.value}) failed to "
                f"load: {type(exc).__name__}: {exc}"
            ) from exc
        source = _module_source(target.__module__)
        source["entry_point"] = entry.target.value
        return target, source
    return target, {}


def file_sha256(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def split_spec(spec: str) -> tuple[str, str]:
    """('file.py' or 'package.module', 'name') of a `where:name` spec."""
    where, sep, name = spec.rpartition(":")
    if not sep or not where or not name.isidentifier():
        raise PluginError(
            f"{spec!r} is not a plug-in spec; expected 'file.py:name' (a Python file) or "
            "'package.module:name' (an importable module)"
        )
    return where, name


def load_spec(
    spec: str, base_dirs: Iterable[Path] = (), recorded: dict | None = None
) -> tuple[Any, dict]:
    """The object a spec names, and its source {file, sha256} (and {module} for a module).

    A relative file is looked for in each of `base_dirs` (the scenario file's folder),
    then at the path `recorded` (a source from a scenario.yaml), then in the working
    folder. When `recorded` has a sha256, the file must still have it. Within a
    scenario_trust block the plug-in must be one it allows, and with its run_code False
    nothing is imported: the object is an Unchecked placeholder."""
    where, name = split_spec(spec)
    trust = _TRUST.get()
    if where.endswith(".py"):
        path = find_file(where, base_dirs, recorded)
        if trust is not None:
            trust.check_file(spec, path)
        sha256 = file_sha256(path)
        source = {"file": str(path), "sha256": sha256}
        if trust is not None and not trust.run_code:
            check_unchanged(spec, source, recorded)
            return Unchecked(spec), source
        module = _load_file(path, sha256)
    else:
        if not _MODULE_PATH.match(where):
            raise PluginError(
                f"{spec!r}: {where!r} is neither a .py file nor a module path (package.module)"
            )
        if trust is not None:
            trust.check_module(spec, where)
            if not trust.run_code:
                if importlib.util.find_spec(where.split(".")[0]) is None:
                    raise PluginError(f"{spec!r}: no installed package {where.split('.')[0]!r}")
                return Unchecked(spec), {"module": where}
        try:
            module = importlib.import_module(where)
        except Exception as exc:
            raise PluginError(
                f"{spec!r}: cannot import module {where!r}: {type(exc).__name__}: {exc}"
            ) from exc
        source = _module_source(where)
    check_unchanged(spec, source, recorded)
    try:
        return getattr(module, name), source
    except AttributeError:
        raise PluginError(f"{spec!r}: {source.get('file', where)} has no {name!r}") from None


def find_file(where: str, base_dirs: Iterable[Path], recorded: dict | None) -> Path:
    path = Path(where).expanduser()
    candidates = [path] if path.is_absolute() else [Path(d) / path for d in base_dirs]
    if recorded and recorded.get("file") and not path.is_absolute():
        candidates.append(Path(recorded["file"]))  # the file a scenario.yaml was made with
    if not path.is_absolute():
        candidates.append(Path.cwd() / path)
    tried: list[str] = []
    for candidate in candidates:
        if str(candidate) in tried:
            continue
        tried.append(str(candidate))
        if candidate.is_file():
            return candidate.resolve()
    raise PluginError(f"plug-in file {where!r} not found (looked at {', '.join(tried)})")


def check_unchanged(spec: str, source: dict, recorded: dict | None) -> None:
    """A plug-in recorded with a hash must still have it (scenario.yaml, --resume)."""
    if not recorded or not recorded.get("sha256") or not source.get("sha256"):
        return
    if recorded["sha256"] != source["sha256"]:
        raise PluginError(
            f"{spec!r}: {source.get('file')} has changed since this scenario was recorded "
            f"(SHA-256 was {recorded['sha256'][:12]}..., is now {source['sha256'][:12]}...), so "
            "the run would not be the one recorded; restore the file, or remove the "
            "`source:` entry to accept the new code (not for --resume: start a new run)"
        )


_LOADED: dict[tuple[str, str], Any] = {}


def _load_file(path: Path, sha256: str):
    """Import a Python file as a module (once per content), its folder importable while it
    runs (so that it may import its neighbours)."""
    key = (str(path), sha256)
    if key in _LOADED:
        return _LOADED[key]
    module_name = f"fedjoule_plugin_{re.sub(r'[^A-Za-z0-9_]', '_', path.stem)}_{sha256[:12]}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise PluginError(f"{path}: cannot be loaded as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    sys.path.insert(0, str(path.parent))
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(module_name, None)
        line = ""
        tb = exc.__traceback__
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == str(path):
                line = f" (line {tb.tb_lineno})"
            tb = tb.tb_next
        raise PluginError(f"{path}{line}: {type(exc).__name__}: {exc}") from exc
    finally:
        try:
            sys.path.remove(str(path.parent))
        except ValueError:
            pass
    _LOADED[key] = module
    return module


def _module_source(module_name: str) -> dict:
    module = sys.modules.get(module_name) or importlib.import_module(module_name)
    source: dict = {"module": module_name}
    file = getattr(module, "__file__", None)
    if file:
        source["file"] = str(Path(file).resolve())
        source["sha256"] = file_sha256(file)
    return source


def call_plugin(what: str, function, *args, **kwargs):
    """Call user code; its failure becomes a PluginError naming `what` (not a traceback
    from inside fedjoule)."""
    try:
        return function(*args, **kwargs)
    except PluginError:
        raise
    except Exception as exc:
        raise PluginError(f"{what} failed: {type(exc).__name__}: {exc}") from exc
