"""The documentation stands alone: no file points to design notes outside the repository,
and every relative Markdown link (and every `docs/*.md#anchor` named in code) resolves.

Anchors are checked against the target's headings with GitHub's slug rule (lower case,
punctuation dropped, spaces to hyphens, -1, -2, ... for repeated headings).
"""

import re
import subprocess
import unicodedata
from functools import cache
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parents[1]

# The design notes that lived beside the repository; built here so that this file does
# not name them itself.
OUTSIDE_NOTES = ("WIRELESS", "ALGORITHMS", "PERFORMANCE", "DESIGN")
NOTE_NAME = re.compile(r"\b(?:" + "|".join(OUTSIDE_NOTES) + r")\.md\b")
# The folder beside the checkout: only its datasets folder (the data default of `make
# test` and the benchmarks' usage lines) may be named, never a note in it.
SHARED_PATH = re.compile(r"\.\./shared/(?!datasets(?:/|\b))")

INLINE_LINK = re.compile(
    r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*(<[^>]*>|[^)\s]+)(?:\s+[\"'(][^)]*)?\)"
)
REFERENCE_LINK = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)")
HTML_ANCHOR = re.compile(r"<a\s[^>]*(?:id|name)=[\"']([^\"']+)[\"']", re.IGNORECASE)
FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
INLINE_CODE = re.compile(r"(`+)(.+?)\1")
# `docs/models.md#path-loss`, `README.md#install` named in code or text
DOC_MENTION = re.compile(
    r"(?<![\w/.-])((?:docs/[\w./-]*|benchmarks/[\w./-]*|README)\.md)(?:#([\w-]+))?"
)


def repository_files() -> list[Path]:
    """Tracked files and new files git does not ignore (the working tree as it will be
    committed), that exist."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
            cwd=ROOT,
            capture_output=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    names = sorted({n for n in out.decode("utf-8", "replace").split("\0") if n})
    return [ROOT / n for n in names if not n.startswith(".venv/") and (ROOT / n).is_file()]


def text_of(path: Path) -> str | None:
    """The file's text, or None for a binary file."""
    data = path.read_bytes()
    if b"\0" in data[:8192]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def github_slug(text: str) -> str:
    """GitHub's anchor for a heading's rendered text."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # links: their text
    text = INLINE_CODE.sub(lambda m: m.group(2), text)
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    text = unicodedata.normalize("NFC", text).strip().lower()
    text = "".join(ch for ch in text if ch.isalnum() or ch in " -_")
    return text.replace(" ", "-")


def prose_lines(text: str):
    """(line number, line) of a Markdown text outside fenced code blocks."""
    fence = None
    for number, line in enumerate(text.splitlines(), 1):
        opened = FENCE.match(line)
        if fence is None and opened:
            fence = opened.group(1)[0] * len(opened.group(1))
            continue
        if fence is not None:
            if line.strip().startswith(fence):
                fence = None
            continue
        yield number, line


@cache
def anchors_of(path: Path) -> frozenset[str]:
    """Every anchor a Markdown file defines: its headings' slugs and HTML anchors."""
    seen: dict[str, int] = {}
    anchors = set()
    for _, line in prose_lines(path.read_text(encoding="utf-8")):
        anchors.update(HTML_ANCHOR.findall(line))
        heading = HEADING.match(line)
        if not heading:
            continue
        slug = github_slug(heading.group(2))
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(slug if count == 0 else f"{slug}-{count}")
    return frozenset(anchors)


def check_target(source: Path, target: str, base: Path) -> str | None:
    """What is wrong with a relative link `target` written in `source` (resolved against
    `base`), or None."""
    path_part, _, anchor = target.partition("#")
    path_part = unquote(path_part)
    destination = (base / path_part).resolve() if path_part else source
    if ROOT not in destination.parents and destination != ROOT:
        return f"{target!r} points outside the repository"
    if not destination.exists():
        return f"{target!r}: {destination.relative_to(ROOT)} does not exist"
    if anchor and destination.suffix.lower() == ".md":
        if unquote(anchor).lower() not in anchors_of(destination):
            return f"{target!r}: no heading with the anchor #{anchor} in {destination.name}"
    return None


def markdown_files() -> list[Path]:
    return [p for p in repository_files() if p.suffix.lower() == ".md"]


def test_no_file_points_to_the_outside_design_notes():
    problems = []
    for path in repository_files():
        text = text_of(path)
        if text is None:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            for pattern in (NOTE_NAME, SHARED_PATH):
                for match in pattern.finditer(line):
                    where = path.relative_to(ROOT)
                    problems.append(f"{where}:{number}: {match.group(0)!r}: {line.strip()}")
    assert not problems, (
        "these lines point to notes outside the repository; point to docs/ (models.md, "
        "algorithms.md, datasets.md, ...) or to the source paper instead:\n" + "\n".join(problems)
    )


def test_relative_markdown_links_resolve():
    problems = []
    checked = 0
    for path in markdown_files():
        for number, line in prose_lines(path.read_text(encoding="utf-8")):
            line = INLINE_CODE.sub("", line)
            targets = [m.group(1) for m in INLINE_LINK.finditer(line)]
            reference = REFERENCE_LINK.match(line)
            if reference:
                targets.append(reference.group(1))
            for target in targets:
                target = target.strip("<>")
                if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):
                    continue  # http:, https:, mailto:, ...
                checked += 1
                problem = check_target(path, target, path.parent)
                if problem:
                    problems.append(f"{path.relative_to(ROOT)}:{number}: {problem}")
    assert checked > 0, "no relative links found: the link pattern is broken"
    assert not problems, "broken relative links:\n" + "\n".join(problems)


def test_documentation_anchors_named_in_code_resolve():
    """`docs/models.md#outage` in a docstring, comment or schema description must name
    an existing file and heading (paths relative to the repository root); a mention
    without an anchor is checked only when the file exists."""
    problems = []
    for path in repository_files():
        if path.suffix.lower() == ".md" and path.parent != ROOT:
            continue  # docs link to each other relatively; checked above
        text = text_of(path)
        if text is None:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            for match in DOC_MENTION.finditer(line):
                name, anchor = match.group(1), match.group(2)
                if not (ROOT / name).is_file():
                    # with an anchor it is meant for our docs; without one it may be
                    # another project's file (a source quoting its docs/ folder)
                    if anchor:
                        problems.append(f"{path.relative_to(ROOT)}:{number}: {name} missing")
                    continue
                if anchor and anchor.lower() not in anchors_of(ROOT / name):
                    problems.append(
                        f"{path.relative_to(ROOT)}:{number}: {name} has no heading #{anchor}"
                    )
    assert not problems, "documentation named in the code does not exist:\n" + "\n".join(problems)


@pytest.mark.parametrize(
    ("heading", "slug"),
    [
        ("The checks that pin them (tests/algorithms)", "the-checks-that-pin-them-testsalgorithms"),
        ("`synthetic`: generated logistic data", "synthetic-generated-logistic-data"),
        (
            "The optimal number of local steps: `fedjoule plan`",
            "the-optimal-number-of-local-steps-fedjoule-plan",
        ),
        ("End to end against Flower (`end_to_end.py`)", "end-to-end-against-flower-end_to_endpy"),
        ("Energy to target and the optimal K", "energy-to-target-and-the-optimal-k"),
    ],
)
def test_github_slug(heading, slug):
    assert github_slug(heading) == slug
