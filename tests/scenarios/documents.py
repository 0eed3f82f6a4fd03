"""Paths into parsed YAML documents (nested dicts and lists), for the validation fuzzers:
tests/scenarios/test_fuzz_validation.py and benchmarks/fuzz_validation.py."""


def leaves(node, path=()):
    """Every (path, value) of a parsed document, parents before their children."""
    if isinstance(node, dict):
        for k, v in node.items():
            yield (*path, k), v
            yield from leaves(v, (*path, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield (*path, i), v
            yield from leaves(v, (*path, i))


def set_path(raw, path, value) -> None:
    """Set `path` (ints: list indices) to `value`, making or replacing what is in the way."""
    node = raw
    for part, nxt in zip(path, path[1:], strict=False):
        if isinstance(node, list):
            while len(node) <= part:
                node.append({})
        child = node.get(part) if isinstance(node, dict) else node[part]
        if isinstance(nxt, int) and not isinstance(child, list):
            child = [{}]
        elif not isinstance(nxt, int) and not isinstance(child, dict):
            child = {}
        node[part] = child
        node = child
    if isinstance(node, list):
        while len(node) <= path[-1]:
            node.append({})
    node[path[-1]] = value


def delete_path(raw, path) -> None:
    node = raw
    for part in path[:-1]:
        node = node[part]
    del node[path[-1]]
