"""The docs hold together: every relative link and #anchor resolves; no doc but notes is long.

Links are read as GitHub renders them (issue 24, item 8): a relative target
is a path from the linking file's directory; an anchor is a heading's
GitHub slug (lower case, punctuation but ``-`` and ``_`` dropped, each space
a ``-``, a repeated slug suffixed ``-1``, ``-2``: github-slugger, which
github.com uses).  Links inside code (fenced blocks, indented blocks,
inline code spans) are text, not links.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
NOTES = DOCS / "notes"
MAX_LINES = 500  # issue 24, done-means: no file in docs/ (outside docs/notes/) over 500 lines

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
INLINE_CODE = re.compile(r"(`+).*?\1")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")
# github-slugger drops every character but letters, digits, spaces, '-' and '_'.
NOT_SLUG = re.compile(r"[^\w\- ]", re.UNICODE)


def markdown_files() -> list[Path]:
    """README.md and every Markdown file under docs/."""
    return [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


def prose_numbers(text: str) -> set[int]:
    """The 1-based numbers of ``text``'s lines that are not code (fenced or indented blocks)."""
    numbers: set[int] = set()
    fenced = False
    previous_blank = True
    for number, line in enumerate(text.split("\n"), start=1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        # An indented block starts after a blank line; a list item's continuation is prose.
        indented = (
            previous_blank
            and line.startswith("    ")
            and not line.lstrip().startswith(("-", "*", "|"))
        )
        if not fenced and not indented:
            numbers.add(number)
        previous_blank = not line.strip() or (indented and previous_blank)
    return numbers


def prose(path: Path) -> list[tuple[int, str]]:
    """(line number, line) of every line of ``path`` outside code blocks."""
    lines = path.read_text(encoding="utf-8").split("\n")
    keep = prose_numbers("\n".join(lines))
    return [(number, line) for number, line in enumerate(lines, start=1) if number in keep]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text, not its target
    return NOT_SLUG.sub("", text.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every anchor GitHub gives the headings of ``path``, repeats numbered."""
    seen: dict[str, int] = {}
    found: set[str] = set()
    for _, line in prose(path):
        match = HEADING.match(line)
        if not match:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(path: Path) -> list[tuple[int, str]]:
    """(line number, target) of every link in ``path``'s prose; images and code left out."""
    return [
        (number, target)
        for number, line in prose(path)
        for target in LINK.findall(INLINE_CODE.sub("", line))
    ]


def shown(path: Path) -> str:
    """``path`` as a message names it: from the repository's root when inside it."""
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def broken(path: Path, target: str) -> str | None:
    """Why ``target``, linked from ``path``, does not resolve; None when it does."""
    if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto: ...: not ours to check
        return None
    file_part, _, anchor = target.partition("#")
    linked = (path.parent / file_part).resolve() if file_part else path
    if not linked.exists():
        return f"no file {shown(linked)}"
    if anchor and linked.suffix == ".md" and anchor not in anchors(linked):
        return f"no heading with anchor #{anchor} in {shown(linked)}"
    return None


@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_and_anchor_resolves(path: Path) -> None:
    problems = [
        f"{path.relative_to(ROOT)}:{number}: ({target}) {why}"
        for number, target in links(path)
        if (why := broken(path, target)) is not None
    ]
    assert not problems, "broken links:\n" + "\n".join(problems)


@pytest.mark.parametrize(
    "path",
    [p for p in sorted(DOCS.rglob("*.md")) if NOTES not in p.parents],
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_no_doc_outside_notes_is_over_500_lines(path: Path) -> None:
    count = len(path.read_text(encoding="utf-8").splitlines())
    assert count <= MAX_LINES, (
        f"{path.relative_to(ROOT)} has {count} lines (at most {MAX_LINES}): "
        "move dated logs to docs/notes/ or split it by topic"
    )


def test_slug_follows_github() -> None:
    # Headings of this repository's docs and the anchors github.com gives them.
    assert slug("Crashes during a test") == "crashes-during-a-test"
    assert slug("destroy vs CONNECT_REPLY") == "destroy-vs-connect_reply"
    assert slug("disconnect vs the peer's disconnect") == "disconnect-vs-the-peers-disconnect"
    assert slug("The kernel: `hil lab kernel [--rebuild] [--source SOURCE] [--debug]`") == (
        "the-kernel-hil-lab-kernel---rebuild---source-source---debug"
    )
    assert (
        slug("Everything in one run: `bench/run_all.py`") == "everything-in-one-run-benchrun_allpy"
    )


def test_a_broken_link_and_a_missing_anchor_are_found(tmp_path: Path) -> None:
    doc = tmp_path / "a.md"
    doc.write_text(
        "# Title\n\n## Part one\n\nsee [x](#part-one), [y](#part-two), [z](b.md)\n\n"
        "    [code](nowhere.md)\n"
    )
    found = {target: broken(doc, target) for _, target in links(doc)}
    assert found == {
        "#part-one": None,
        "#part-two": f"no heading with anchor #part-two in {doc}",
        "b.md": f"no file {tmp_path / 'b.md'}",
    }
