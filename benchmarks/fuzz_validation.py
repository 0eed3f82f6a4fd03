"""Validation fuzzing: thousands of generated bad (and odd) scenario files through
`load_scenario`, each answered by a Scenario or a clean FedjouleError, quickly.

The files: mutations of every built-in scenario (a leaf or a schema field replaced by a
hostile value - NaN, inf, huge or negative numbers, booleans, text, lists, mappings,
null - or by an extreme but legal one; keys deleted; unknown keys added; text-level
damage: a duplicated line, a tagged or malformed YAML value, a cut, stray bytes) and
files written from scratch (non-UTF-8 and binary data, nesting 500 to 100,000 deep, bad
explicit tags, integers of 4,301+ digits, alias bombs, 200,000 unknown keys, a 10 MB
scalar, a folder, random documents). Each is loaded in this process under a 10 s alarm
(signal.setitimer), and counted as accepted, a clean error (FedjouleError), a traceback
(any other exception) or a hang (the alarm).

    PYTHONPATH=. python benchmarks/fuzz_validation.py [--mutations 2700] [--scratch 440]
        [--seed 0] [--accepted-out DIR] [--accepted-max 400]

Prints the counts, the slowest time and the longest message; saves them with the
tracebacks and hangs (if any) to benchmarks/results/fuzz-validation.json. With
--accepted-out, the mutations that validate (up to --accepted-max, each with a comment
line saying what was changed) are written there for the run-time fuzz
(benchmarks/fuzz_runtime.py --cases DIR).
"""

import argparse
import math
import random
import signal
import sys
import tempfile
import time
import types
import typing
from pathlib import Path

import annotated_types as at
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from record import save_results  # noqa: E402

from tests.scenarios.documents import delete_path, leaves, set_path  # noqa: E402

HANG_S = 10.0

HOSTILE_VALUES = [
    math.nan, math.inf, -math.inf, 1e308, -1e308, 1e-308, 5e-324, 10**30, -(10**30), 2**63,
    2**63 - 1, -1, 0, -0.5, 0.5, 1.5, 1e9, True, False, None, "abc", "", "1e6", "NaN",
    "x" * 500, [], [1, 2], [[1.0, 2.0]], [None], {}, {"a": 1}, [[[[[1]]]]], {"name": "x"},
]  # fmt: skip

HOSTILE_TEXT = [
    "!!int abc", "!!bool maybe", "!!float x", "!!python/object/apply:os.system ['ls']",
    "!!python/name:os.system", "*undefined", "&a [*a]", "!!binary '%%%'", "9" * 5000,
    "-" + "1" * 4400, ".nan", ".inf", "-.inf", "[" * 600, "{a: 1, a: 2}", "!!timestamp x",
    "0x1F", "0b101", "1_000", "12:30:00", "59:" * 2000 + "1", "~", "'", '"unterminated',
    "!!set {a, b}", "!!omap [a: 1]", "!custom 1", "yes", "no", "on", "1e400", "-0", "0o17",
    "+.5", "1e6", "1.0e+6", "[1, [2, [3]]]", "{<<: {x: 1}}", "!!str 5", "!!null x",
    "&anchor 5", "!!map [1]", "!!seq {a: 1}", "'" + "y" * 300_000 + "'",
]  # fmt: skip


# --------------------------------------------------------------------------- the schema


def _unwrap(annotation, metadata):
    """(base annotation, metadata) with Annotated layers folded into the metadata."""
    while typing.get_origin(annotation) is typing.Annotated:
        annotation, *extra = typing.get_args(annotation)
        for m in extra:
            metadata = [*metadata, *getattr(m, "metadata", [m])]
    return annotation, metadata


def _bounds(metadata) -> tuple[float | None, float | None, bool, bool]:
    lo = hi = None
    lo_open = hi_open = False
    for m in metadata:
        if isinstance(m, at.Ge):
            lo = m.ge
        elif isinstance(m, at.Gt):
            lo, lo_open = m.gt, True
        elif isinstance(m, at.Le):
            hi = m.le
        elif isinstance(m, at.Lt):
            hi, hi_open = m.lt, True
    return lo, hi, lo_open, hi_open


def schema_fields() -> list[tuple[tuple, typing.Any, list, str | None]]:
    """(path, annotation, metadata, algorithm) of every value field of the schema; a path
    through a list of sections uses index 0."""
    from pydantic import BaseModel

    from fedjoule.algorithms.registry import ALGORITHMS
    from fedjoule.scenarios.schema import Scenario

    out = []

    def walk(model, prefix):
        for name, info in model.model_fields.items():
            if model is Scenario and name == "algorithm":
                continue
            ann = info.annotation
            if isinstance(ann, type) and issubclass(ann, BaseModel):
                walk(ann, (*prefix, name))
                continue
            item = typing.get_args(ann)[0] if typing.get_origin(ann) is list else None
            if isinstance(item, type) and issubclass(item, BaseModel):
                walk(item, (*prefix, name, 0))
                continue
            out.append(((*prefix, name), ann, list(info.metadata), None))

    walk(Scenario, ())
    for algorithm, (_, config) in ALGORITHMS.items():
        for name, info in config.model_fields.items():
            if name != "name":
                out.append((("algorithm", name), info.annotation, list(info.metadata), algorithm))
    return out


def legal_extreme(rng: random.Random, annotation, metadata):
    """An extreme value the field accepts (or nearly: cross-field checks may still fail)."""
    annotation, metadata = _unwrap(annotation, metadata)
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if type(None) in typing.get_args(annotation) and rng.random() < 0.2:
            return None
        return legal_extreme(rng, rng.choice(args), metadata)
    if origin is typing.Literal:
        return rng.choice(typing.get_args(annotation))
    if origin is list:
        inner = typing.get_args(annotation)[0]
        most = next((m.max_length for m in metadata if isinstance(m, at.MaxLen)), 8)
        least = next((m.min_length for m in metadata if isinstance(m, at.MinLen)), 0)
        n = rng.choice([least, max(least, 1), min(most, max(least, 3)), min(most, 32)])
        return [legal_extreme(rng, inner, []) for _ in range(n)]
    if annotation is bool:
        return rng.random() < 0.5
    if annotation is str:
        return rng.choice(["x", "a b", "ünï", "../../etc/passwd", "x" * 90, "/dev/null"])
    lo, hi, lo_open, hi_open = _bounds(metadata)
    if annotation is int:
        lo = 0 if lo is None else int(lo) + (1 if lo_open else 0)
        hi = 10**6 if hi is None else int(hi) - (1 if hi_open else 0)
        return rng.choice([lo, hi, lo + 1, max(lo, hi - 1), rng.randint(lo, min(hi, lo + 100))])
    lo_f = -1e12 if lo is None else float(lo)
    hi_f = 1e12 if hi is None else float(hi)
    if lo_open:
        lo_f = math.nextafter(lo_f, math.inf)
    if hi_open:
        hi_f = math.nextafter(hi_f, -math.inf)
    choices = [lo_f, hi_f, lo_f + (hi_f - lo_f) * rng.random()]
    if lo_f >= 0 and hi_f > 0:  # log-uniform over the positive range
        a, b = math.log10(max(lo_f, 1e-12)), math.log10(hi_f)
        choices.append(10 ** (a + (b - a) * rng.random()))
    return rng.choice(choices)


# --------------------------------------------------------------------------- mutations


def typo(rng: random.Random, name: str) -> str:
    i = rng.randrange(len(name))
    return rng.choice(
        [name[:i] + name[i + 1 :], name[:i] + name[i] * 2 + name[i + 1 :], name + "s"]
    )


def mutate(rng: random.Random, raw: dict, fields: list) -> tuple[dict, list[str]]:
    """A copy of `raw` with 1 to 3 dict-level changes, and their descriptions."""
    import copy

    raw = copy.deepcopy(raw)
    notes = []
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        op = rng.choice(
            ["leaf", "field", "extreme", "extreme", "extreme", "delete", "unknown", "section",
             "algorithm"]
        )  # fmt: skip
        existing = [(p, v) for p, v in leaves(raw)]
        if op == "leaf" and existing:
            path, _ = rng.choice(existing)
            value = rng.choice(HOSTILE_VALUES)
            set_path(raw, path, copy.deepcopy(value))
            notes.append(f"{'.'.join(map(str, path))} = {value!r:.60}")
        elif op in ("field", "extreme"):
            path, annotation, metadata, algorithm = rng.choice(fields)
            if algorithm:
                raw["algorithm"] = {"name": algorithm}
            if op == "field":
                value = rng.choice(HOSTILE_VALUES)
            else:
                value = legal_extreme(rng, annotation, metadata)
            set_path(raw, path, copy.deepcopy(value))
            notes.append(f"{'.'.join(map(str, path))} = {value!r:.60}")
        elif op == "delete" and existing:
            path, _ = rng.choice(existing)
            delete_path(raw, path)
            notes.append(f"deleted {'.'.join(map(str, path))}")
        elif op == "unknown":
            sections = [((), raw)] + [(p, v) for p, v in existing if isinstance(v, dict)]
            path, node = rng.choice(sections)
            names = [k for k in node if isinstance(k, str)] or ["x"]
            key = rng.choice([typo(rng, rng.choice(names)), f"extra_{rng.randrange(1000)}"])
            node[key] = rng.choice([1, "x", None, [1]])
            notes.append(f"unknown key {'.'.join(map(str, (*path, key)))}")
        elif op == "section":
            name = rng.choice(["training", "population", "channel", "round", "dataset"])
            value = rng.choice([None, [], "text", 5, [{"a": 1}], {}])
            raw[name] = value
            notes.append(f"{name} = {value!r}")
        elif op == "algorithm":
            from fedjoule.algorithms.registry import ALGORITHMS

            name = rng.choice(sorted(ALGORITHMS))
            raw["algorithm"] = {"name": name}
            notes.append(f"algorithm.name = {name}")
    return raw, notes


def damage_text(rng: random.Random, text: str) -> tuple[str | bytes, str]:
    """Text-level damage: a duplicated line, a hostile YAML value, a cut, stray bytes."""
    lines = text.splitlines(keepends=True)
    keyed = [i for i, line in enumerate(lines) if ":" in line and not line.lstrip().startswith("#")]
    op = rng.choice(["dup", "dup", "tagged", "tagged", "tagged", "cut", "bytes", "indent"])
    if op == "dup" and keyed:
        i = rng.choice(keyed)
        lines.insert(i + 1, lines[i])
        return "".join(lines), f"line {i + 1} duplicated"
    if op == "tagged" and keyed:
        i = rng.choice(keyed)
        key = lines[i].split(":", 1)[0]
        snippet = rng.choice(HOSTILE_TEXT)
        lines[i] = f"{key}: {snippet}\n"
        return "".join(lines), f"line {i + 1} value = {snippet[:40]!r}"
    if op == "cut":
        at_ = rng.randrange(len(text) + 1)
        return text[:at_], f"cut at {at_}"
    if op == "indent" and keyed:
        i = rng.choice(keyed)
        lines[i] = rng.choice(["\t", " ", "   "]) + lines[i]
        return "".join(lines), f"line {i + 1} re-indented"
    data = text.encode()
    at_ = rng.randrange(len(data) + 1)
    junk = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
    return data[:at_] + junk + data[at_:], f"{len(junk)} random bytes at {at_}"


def mutations(rng: random.Random, count: int):
    """`count` mutated files, spread over the built-in scenarios."""
    from fedjoule.scenarios.loading import builtin_names, builtin_text

    fields = schema_fields()
    bases = {name: yaml.safe_load(builtin_text(name)) for name in builtin_names()}
    names = sorted(bases)
    for i in range(count):
        name = names[i % len(names)]
        raw, notes = mutate(rng, bases[name], fields)
        text = yaml.safe_dump(raw, sort_keys=False, allow_unicode=True)
        content: str | bytes = text
        if rng.random() < 0.3:
            content, note = damage_text(rng, text)
            notes.append(note)
        yield f"mut-{i:05d}-{name}", "mutation", content, "; ".join(notes)


# --------------------------------------------------------------------------- from scratch


def billion_laughs(levels: int, target: str = "") -> str:
    lines = ["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]")
    if target:
        lines.append(f"{target}*a{levels - 1}")
    return "\n".join(lines) + "\n"


def random_document(rng: random.Random, fields: list, depth: int = 0):
    """A random mapping mixing schema sections and fields with random keys and values."""
    doc: dict = {}
    for _ in range(rng.randint(0, 6)):
        if rng.random() < 0.6:
            path, annotation, metadata, algorithm = rng.choice(fields)
            value = (
                legal_extreme(rng, annotation, metadata)
                if rng.random() < 0.6
                else rng.choice(HOSTILE_VALUES)
            )
            set_path(doc, path, value)
            if algorithm:
                doc.setdefault("algorithm", {})["name"] = algorithm
        else:
            key = rng.choice(["training", "x", "", "population", "ü", "1", "seed", "name"])
            doc[key] = (
                random_document(rng, fields, depth + 1)
                if depth < 3 and rng.random() < 0.3
                else rng.choice(HOSTILE_VALUES)
            )
    return doc


def scratch(rng: random.Random, count: int):
    """`count` files written from scratch: the hostile kinds, then random documents."""
    fields = schema_fields()
    fixed: list[tuple[str, str | bytes | None]] = [
        ("non-utf8", b"name: caf\xe9\n"),
        ("latin1-doc", "name: d\u00e9j\u00e0\ntraining: {rounds: 3}\n".encode("latin-1")),
        ("utf16", "seed: 1\n".encode("utf-16")),
        ("bom", "\ufeffseed: 1\n".encode()),
        ("crlf", b"seed: 1\r\ntraining:\r\n  rounds: 3\r\n"),
        ("empty", b""),
        ("comments", b"# nothing\n# here\n"),
        ("folder", None),
        ("nul", b"seed: 1\x00\n"),
        ("10MB-scalar", b"name: " + b"x" * 10_000_000 + b"\n"),
        ("200k-unknown-keys", "".join(f"k{i}: {i}\n" for i in range(200_000)).encode()),
        ("20k-unknown-keys", "".join(f"k{i}: {i}\n" for i in range(20_000)).encode()),
        ("10k-unknown-keys", "".join(f"k{i}: {i}\n" for i in range(10_000)).encode()),
        ("flow-list-100k", b"model: {hidden: [" + b"1," * 100_000 + b"1]}\n"),
        ("json", b'{"seed": 1, "training": {"rounds": 2}}'),
        ("list-doc", b"- 1\n- 2\n"),
        ("scalar-doc", b"42\n"),
        ("two-docs", b"seed: 1\n---\nseed: 2\n"),
        ("recursive-alias", b"training: &t\n  x: *t\n"),
        ("merge", b"base: &b {rounds: 4}\ntraining:\n  <<: *b\n"),
        ("python-object", b"seed: !!python/object/apply:os.system ['echo x']\n"),
        ("bad-int-tag", b"training:\n  rounds: !!int abc\n"),
        ("bad-bool-tag", b"output:\n  events: !!bool maybe\n"),
        ("bad-float-tag", b"training:\n  lr: !!float fast\n"),
        ("long-line", b"description: " + b"y" * 200_000 + b"\n"),
    ]
    for depth in (50, 500, 5_000, 100_000):
        fixed.append((f"nest-flow-{depth}", b"a: " + b"[" * depth + b"]" * depth))
        fixed.append((f"nest-map-{depth}", b"{a: " * depth + b"1" + b"}" * depth))
    for depth in (40, 200, 600):
        fixed.append(
            (f"nest-block-{depth}", "".join(" " * i + "k:\n" for i in range(depth)).encode())
        )
    for digits in (4301, 10_000, 100_000):
        fixed.append((f"int-{digits}-digits", b"population:\n  size: " + b"7" * digits + b"\n"))
    for levels in (4, 6, 9, 12):
        fixed.append((f"bomb-{levels}", billion_laughs(levels).encode()))
        fixed.append(
            (
                f"bomb-{levels}-in-field",
                billion_laughs(levels, "model: {hidden: ").encode()[:-1] + b"}\n",
            )
        )
    for n in range(20):
        fixed.append(
            (
                f"binary-{n}",
                bytes(rng.randrange(256) for _ in range(rng.choice([10, 1000, 100_000]))),
            )
        )
    for i, snippet in enumerate(HOSTILE_TEXT):
        fixed.append((f"hostile-text-{i}", f"training:\n  rounds: {snippet}\n".encode()))
    for i, (label, content) in enumerate(fixed[:count]):
        yield f"new-{i:05d}-{label}", "scratch", content, label
    for i in range(len(fixed), count):
        doc = random_document(rng, fields)
        text = yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)
        if rng.random() < 0.2:
            text, note = damage_text(rng, text)
        yield f"new-{i:05d}-random", "scratch", text, "random document"


# --------------------------------------------------------------------------- checking


class Hang(Exception):
    pass


def _alarm(signum, frame):
    raise Hang()


def check(path: Path) -> tuple[str, float, int, str]:
    """(accepted | clean | traceback | hang, seconds, message lines, message excerpt)."""
    from fedjoule.errors import FedjouleError
    from fedjoule.scenarios.loading import load_scenario

    start = time.perf_counter()
    signal.setitimer(signal.ITIMER_REAL, HANG_S)
    try:
        load_scenario(path)
        status, message = "accepted", ""
    except FedjouleError as exc:
        status, message = "clean", str(exc)
    except Hang:
        status, message = "hang", ""
    except BaseException as exc:  # noqa: BLE001 - a traceback is what is counted
        if isinstance(exc, KeyboardInterrupt):
            raise
        status, message = "traceback", f"{type(exc).__name__}: {str(exc)[:300]}"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    seconds = time.perf_counter() - start
    lines = message.count("\n") + 1 if message else 0
    return status, seconds, lines, message


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mutations", type=int, default=2_700)
    parser.add_argument("--scratch", type=int, default=440)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--accepted-out", type=Path, default=None)
    parser.add_argument("--accepted-max", type=int, default=400)
    args = parser.parse_args()
    signal.signal(signal.SIGALRM, _alarm)
    rng = random.Random(args.seed)
    counts = {"files": 0, "accepted": 0, "clean": 0, "traceback": 0, "hang": 0}
    by_source = {"mutation": dict(counts), "scratch": dict(counts)}
    findings, times, slowest, longest = [], [], [], (0, "")
    written = 0
    if args.accepted_out:
        args.accepted_out.mkdir(parents=True, exist_ok=True)
    tic = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        cases = [*mutations(rng, args.mutations), *scratch(rng, args.scratch)]
        for case, source, content, note in cases:
            path = Path(tmp) / f"{case}.yaml"
            if content is None:
                path.mkdir()
            elif isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(content, encoding="utf-8")
            status, seconds, lines, message = check(path)
            for table in (counts, by_source[source]):
                table["files"] += 1
                table[status] += 1
            times.append(seconds)
            slowest = sorted([*slowest, (seconds, case)], reverse=True)[:10]
            if lines > longest[0]:
                longest = (lines, case)
            if status in ("traceback", "hang"):
                findings.append({"case": case, "status": status, "note": note, "error": message})
            if (
                status == "accepted"
                and source == "mutation"
                and args.accepted_out
                and written < args.accepted_max
            ):
                header = f"# fuzz_validation.py {case}: {note}\n".replace("\n", " ").strip()
                text = content if isinstance(content, str) else content.decode("utf-8")
                (args.accepted_out / f"{case}.yaml").write_text(header + "\n" + text)
                written += 1
            if content is None:
                path.rmdir()
            else:
                path.unlink()
    total_s = time.perf_counter() - tic
    times.sort()
    result = {
        **counts,
        "by_source": by_source,
        "max_s": times[-1],
        "p99_s": times[int(0.99 * (len(times) - 1))],
        "mean_s": sum(times) / len(times),
        "max_message_lines": longest[0],
        "longest_message_case": longest[1],
        "slowest": [{"case": c, "s": round(s, 4)} for s, c in slowest],
        "accepted_written": written,
        "total_s": total_s,
        "seed": args.seed,
        "findings": findings[:100],
    }
    print(
        f"{counts['files']} files ({by_source['mutation']['files']} mutations of the built-ins, "
        f"{by_source['scratch']['files']} from scratch): {counts['accepted']} accepted, "
        f"{counts['clean']} clean errors, {counts['traceback']} tracebacks, "
        f"{counts['hang']} hangs (> {HANG_S:g} s)"
    )
    print(
        f"time per file: max {result['max_s']:.3f} s ({slowest[0][1]}), p99 "
        f"{result['p99_s']:.3f} s, mean {result['mean_s'] * 1000:.1f} ms; longest message "
        f"{longest[0]} lines; {total_s:.0f} s in all"
    )
    for finding in findings[:20]:
        print(f"  {finding['status']}: {finding['case']} ({finding['note']}): {finding['error']}")
    if args.accepted_out:
        print(f"{written} accepted mutations written to {args.accepted_out}")
    save_results("fuzz-validation", result)


if __name__ == "__main__":
    main()
