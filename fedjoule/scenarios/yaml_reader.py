"""A safe, bounded YAML reader: any text becomes a value or one short error.

YAML is parsed (libyaml's event parser where present) and composed here without
recursion, so nesting deeper than MAX_DEPTH, more than MAX_NODES values, recursive
aliases and alias "bombs" whose expansion exceeds MAX_VALUES values are errors naming
the line; a key repeated in one mapping is an error naming the key path and both lines;
a scalar whose tag does not fit it (`!!int abc`, `!!bool maybe`) or a number longer than
MAX_NUMBER_CHARS characters becomes an Unreadable value, which validation then reports
under its field; exponents without a dot (`1e6`) are read as floats (YAML 1.2). Only
safe constructors exist: no tag can build a Python object.
"""

import re
import reprlib
from itertools import islice
from typing import Any

import yaml
from yaml.composer import ComposerError
from yaml.constructor import SafeConstructor
from yaml.events import (
    AliasEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
)
from yaml.nodes import MappingNode, ScalarNode, SequenceNode
from yaml.resolver import Resolver

from fedjoule.errors import FedjouleError

MAX_DEPTH = 32  # a scenario nests 4 levels (population.device_classes[i].share)
MAX_NODES = 25_000  # values written in the document (a scenario has a few hundred)
MAX_VALUES = 100_000  # values in the document, each alias counted as what it expands to
MAX_NUMBER_CHARS = 100  # longer integers or floats are not converted (no 4,300-digit ints)
MAX_LINES = 50  # problems listed in one message
SHOWN_CHARS = 80  # the longest excerpt of a value in a message
MESSAGE_CHARS = 800  # the longest line of a message (an 'allowed here' list fits)

MERGE_TAG = "tag:yaml.org,2002:merge"


# --------------------------------------------------------------------------- short values


class _ShortRepr(reprlib.Repr):
    """reprlib with small limits, no full repr of huge integers, dicts or dict subclasses."""

    def __init__(self) -> None:
        super().__init__()
        self.maxlevel = 2
        self.maxdict = self.maxlist = self.maxtuple = self.maxset = self.maxfrozenset = 4
        self.maxstring = self.maxother = SHOWN_CHARS
        self.maxlong = 40

    def repr1(self, x, level):
        if isinstance(x, bool) or x is None:
            return repr(x)
        if isinstance(x, int) and x.bit_length() > 128:
            return f"<an integer of about {int(x.bit_length() * 0.30103) + 1} digits>"
        if isinstance(x, dict):
            if level <= 0:
                return "{...}"
            items = [
                f"{self.repr1(k, level - 1)}: {self.repr1(v, level - 1)}"
                for k, v in islice(x.items(), self.maxdict)
            ]
            more = ", ..." if len(x) > self.maxdict else ""
            return "{" + ", ".join(items) + more + "}"
        if isinstance(x, list):
            return self.repr_list(x, level)
        if isinstance(x, str):
            return self.repr_str(x, level)
        return super().repr1(x, level)


_SHORT = _ShortRepr()


def short(value: Any, limit: int = SHOWN_CHARS) -> str:
    """A one-line excerpt of `value`'s repr, at most `limit` characters."""
    try:
        text = _SHORT.repr(value)
    except Exception:  # noqa: BLE001 - a repr that fails is shown as its type
        text = f"<{type(value).__name__}>"
    text = text.replace("\n", "\\n").replace("\r", "\\r")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def one_line(text: str, limit: int = MESSAGE_CHARS) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


# --------------------------------------------------------------------------- YAML


class Unreadable:
    """A scalar that could not be converted to what its tag says (`!!int abc`, an integer
    of 5,000 digits): kept as a value, so that validation reports it under its field."""

    __slots__ = ("tag", "text", "why")

    def __init__(self, tag: str, text: str, why: str) -> None:
        self.tag, self.text, self.why = tag, text, why

    def __repr__(self) -> str:
        tag = self.tag.replace("tag:yaml.org,2002:", "!!")
        return f"{tag} {short(self.text, 40)} ({self.why})"


class YamlMapping(dict):
    """A mapping read from YAML that remembers the line of each key (for messages)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.key_lines: dict[Any, int] = {}
        self.overridden: set[Any] = set()


class _Resolver(Resolver):
    """YAML 1.1 implicit types plus YAML 1.2 floats written without a dot: 1e6, 2E-3."""


_Resolver.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9][0-9_]*)[eE][-+]?[0-9]+$"),
    list("-+0123456789."),
)

try:
    from yaml.cyaml import CParser as _EventSource  # libyaml's parser: events, no recursion
except ImportError:  # pragma: no cover - libyaml missing: the pure-Python reader and parser
    from yaml.parser import Parser
    from yaml.reader import Reader
    from yaml.scanner import Scanner

    class _EventSource(Reader, Scanner, Parser):  # type: ignore[no-redef]
        def __init__(self, stream) -> None:
            Reader.__init__(self, stream)
            Scanner.__init__(self)
            Parser.__init__(self)


class _Loader(_EventSource, SafeConstructor, _Resolver):
    """A safe loader that composes without recursion and records problems (see module doc)."""

    def __init__(self, text: str) -> None:
        _EventSource.__init__(self, text)
        SafeConstructor.__init__(self)
        _Resolver.__init__(self)
        self.duplicates: list[str] = []

    def get_single_node(self):
        return _compose(self)

    def _number(self, node, convert):
        if len(node.value) > MAX_NUMBER_CHARS:
            return Unreadable(node.tag, node.value, f"{len(node.value)} characters: too long")
        try:
            return convert(self, node)
        except (ValueError, TypeError, KeyError, AttributeError, OverflowError, IndexError):
            return Unreadable(node.tag, node.value, "does not fit its tag")

    def construct_yaml_int(self, node):
        return self._number(node, SafeConstructor.construct_yaml_int)

    def construct_yaml_float(self, node):
        return self._number(node, SafeConstructor.construct_yaml_float)

    def construct_yaml_bool(self, node):
        return self._number(node, SafeConstructor.construct_yaml_bool)

    def construct_yaml_timestamp(self, node):
        return self._number(node, SafeConstructor.construct_yaml_timestamp)

    def construct_yaml_map(self, node):
        data = YamlMapping()
        yield data
        data.update(self.construct_mapping(node))
        for key_node, _ in node.value:
            key = self.construct_object(key_node)
            try:
                data.key_lines.setdefault(key, key_node.start_mark.line + 1)
            except TypeError:  # an unhashable key: construct_mapping has refused it already
                pass


for _tag, _method in [
    ("int", _Loader.construct_yaml_int),
    ("float", _Loader.construct_yaml_float),
    ("bool", _Loader.construct_yaml_bool),
    ("timestamp", _Loader.construct_yaml_timestamp),
    ("map", _Loader.construct_yaml_map),
]:
    _Loader.add_constructor(f"tag:yaml.org,2002:{_tag}", _method)


class _Frame:
    """A collection being composed: its node, the key waiting for its value, keys seen."""

    __slots__ = ("node", "key", "seen", "height", "count")

    def __init__(self, node) -> None:
        self.node, self.key, self.seen, self.height, self.count = node, None, {}, 1, 1


def _compose(loader: _Loader):
    """The document's node graph, built from parser events with an explicit stack."""
    loader.get_event()  # stream start
    if loader.check_event(StreamEndEvent):
        loader.get_event()
        return None
    loader.get_event()  # document start
    root = _Composer(loader).document()
    loader.get_event()  # document end
    if not loader.check_event(StreamEndEvent):
        event = loader.get_event()
        raise _failure("expected one document, found another ('---')", event.start_mark)
    loader.get_event()
    return root


def _failure(problem: str, mark) -> ComposerError:
    return ComposerError(None, None, problem, mark)


class _Composer:
    """One document's nodes from the parser's events, counted against MAX_NODES,
    MAX_DEPTH and MAX_VALUES (what each alias expands to included) as they come."""

    def __init__(self, loader: _Loader) -> None:
        self.loader = loader
        self.anchors: dict[str, Any] = {}
        self.measured: dict[int, tuple[int, int]] = {}  # id(node) -> (height, values)
        self.open_ids: set[int] = set()
        self.stack: list[_Frame] = []
        self.nodes = 0

    def document(self):
        """The root node: events until the outermost node is complete."""
        get_event = self.loader.get_event
        while True:
            event = get_event()
            kind = type(event)
            self.nodes += kind is not SequenceEndEvent and kind is not MappingEndEvent
            if self.nodes > MAX_NODES:
                raise _failure(
                    f"more than {MAX_NODES:,} values, where a scenario has a few hundred",
                    event.start_mark,
                )
            if kind is ScalarEvent:
                node, height, count = self.scalar(event)
            elif kind is SequenceStartEvent or kind is MappingStartEvent:
                self.open_collection(event, kind)
                continue
            elif kind is SequenceEndEvent or kind is MappingEndEvent:
                node, height, count = self.close_collection(event)
            elif kind is AliasEvent:
                node, height, count = self.alias(event)
            else:  # pragma: no cover - the parser yields nothing else inside a document
                raise _failure(f"unexpected {kind.__name__}", event.start_mark)
            if not self.stack:
                return node
            self.attach(node, height, count, event)

    def scalar(self, event):
        tag = event.tag
        if tag is None or tag == "!":
            tag = self.loader.resolve(ScalarNode, event.value, event.implicit)
        node = ScalarNode(tag, event.value, event.start_mark, event.end_mark, event.style)
        if event.anchor is not None:
            self.anchors[event.anchor] = node
            self.measured[id(node)] = (1, 1)
        return node, 1, 1

    def open_collection(self, event, kind) -> None:
        node_class = SequenceNode if kind is SequenceStartEvent else MappingNode
        tag = event.tag
        if tag is None or tag == "!":
            tag = self.loader.resolve(node_class, None, event.implicit)
        node = node_class(tag, [], event.start_mark, None, flow_style=event.flow_style)
        if event.anchor is not None:
            self.anchors[event.anchor] = node
        if len(self.stack) >= MAX_DEPTH:
            raise _failure(f"nested more than {MAX_DEPTH} levels deep", event.start_mark)
        self.stack.append(_Frame(node))
        self.open_ids.add(id(node))

    def close_collection(self, event):
        frame = self.stack.pop()
        node = frame.node
        node.end_mark = event.end_mark
        self.open_ids.discard(id(node))
        self.measured[id(node)] = (frame.height, frame.count)
        return node, frame.height, frame.count

    def alias(self, event):
        node = self.anchors.get(event.anchor)
        if node is None:
            raise _failure(f"found undefined alias {event.anchor!r}", event.start_mark)
        if id(node) in self.open_ids:
            raise _failure(f"alias *{event.anchor} refers to itself", event.start_mark)
        height, count = self.measured[id(node)]
        if len(self.stack) + height > MAX_DEPTH:
            raise _failure(f"nested more than {MAX_DEPTH} levels deep", event.start_mark)
        return node, height, count

    def attach(self, node, height: int, count: int, event) -> None:
        """`node` into the innermost open collection: an item, a mapping's key (duplicate
        keys noted) or its value; the collection's height and expanded count grow."""
        parent = self.stack[-1]
        if height >= parent.height:
            parent.height = height + 1
        parent.count += count
        if parent.count > MAX_VALUES:
            raise _failure(
                f"more than {MAX_VALUES:,} values (counting what each alias expands to)",
                event.start_mark,
            )
        if parent.node.__class__ is SequenceNode:
            parent.node.value.append(node)
        elif parent.key is None:
            parent.key = node
            if node.__class__ is ScalarNode and node.tag != MERGE_TAG:
                key = (node.tag, node.value)
                line = node.start_mark.line + 1
                if key in parent.seen:
                    first = parent.seen[key]
                    duplicate = _duplicate(self.stack, node.value, first, line)
                    self.loader.duplicates.append(duplicate)
                else:
                    parent.seen[key] = line
        else:
            parent.node.value.append((parent.key, node))
            parent.key = None


def _duplicate(stack: list[_Frame], key: str, first: int, line: int) -> str:
    parts = []
    for frame in stack[:-1]:  # the key or index under which the next frame sits
        if isinstance(frame.node, SequenceNode):
            parts.append(str(len(frame.node.value)))
        elif isinstance(frame.key, ScalarNode):
            parts.append(frame.key.value)
        else:
            parts.append("?")
    path = ".".join([*parts, key])
    return f"duplicate key {short(path)} at line {line} (first at line {first})"


def parse_yaml(text: str, label: str) -> Any:
    """The value of one YAML document, or FedjouleError naming `label` and the line."""
    loader = None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise FedjouleError(
            f"{label}: not valid YAML: character {exc.object[exc.start]!r} at position "
            f"{exc.start} is not text (not encodable as UTF-8)"
        ) from None
    try:
        loader = _Loader(text)
        node = loader.get_single_node()
        if loader.duplicates:
            lines = capped(loader.duplicates)
            raise FedjouleError(
                f"{label}: a key appears twice in one mapping (the later value would silently "
                "replace the earlier):\n  " + "\n  ".join(lines)
            )
        return None if node is None else loader.construct_document(node)
    except yaml.YAMLError as exc:
        raise FedjouleError(f"{label}: not valid YAML: {_yaml_problem(exc)}") from None
    except RecursionError:
        raise FedjouleError(f"{label}: not valid YAML: nested too deeply") from None
    except FedjouleError:
        raise
    except Exception as exc:  # noqa: BLE001 - the last net: any reader failure is the file's
        raise FedjouleError(
            f"{label}: could not be read as YAML ({type(exc).__name__}: {one_line(exc, 120)})"
        ) from None
    finally:
        if loader is not None:
            loader.dispose()


def _yaml_problem(exc: yaml.YAMLError) -> str:
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        what = " ".join(str(p) for p in (exc.context, exc.problem) if p)
        if "maximum nesting depth" in what:  # libyaml >= 0.2.5 scans ahead to its 1,000 levels
            what = f"nested more than {MAX_DEPTH} levels deep"
        return one_line(where + what, 200)
    return one_line(str(exc), 200)


def capped(lines: list[str]) -> list[str]:
    """At most MAX_LINES lines, the last one saying how many were left out."""
    if len(lines) <= MAX_LINES:
        return lines
    return lines[:MAX_LINES] + [f"... and {len(lines) - MAX_LINES} more"]
