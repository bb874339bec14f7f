"""The user documentation holds together: the suite reference is the schema's, every key of the
schema is described, and every relative link in README.md and docs/*.md reaches a file."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import Field

from fwlab.suites.reference import nested_model, render
from fwlab.suites.schema import Suite

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

#: [text](target) and <img src="target">; a target may carry a #fragment or a "title"
LINK = re.compile(r"\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)|<img[^>]*\ssrc=\"([^\"]+)\"")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
CODE = re.compile(r"`[^`\n]*`")


def relative_links(text: str, fragments: bool = False) -> list[str]:
    """The relative link targets of a Markdown text (no URLs, none in code); in-page anchors and
    #fragments only with ``fragments`` (else a target is its file part, and a bare #anchor is left out)."""
    text = CODE.sub("", FENCE.sub("", text))
    out = []
    for m in LINK.finditer(text):
        target = m.group(1) or m.group(2)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):
            continue
        if fragments:
            out.append(target)
        elif not target.startswith("#"):
            out.append(target.split("#", 1)[0])
    return out


def broken_links(page: Path) -> list[str]:
    return [t for t in relative_links(page.read_text(encoding="utf-8")) if not (page.parent / t).exists()]


def anchors(page: Path) -> set[str]:
    """The heading anchors of a Markdown page, as GitHub makes them: lower case, punctuation but
    ``-`` and ``_`` dropped, spaces as ``-``, a repeated one numbered."""
    out: set[str] = set()
    for line in FENCE.sub("", page.read_text(encoding="utf-8")).splitlines():
        if m := re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line):
            slug = re.sub(r"[^\w\- ]", "", m.group(1).lower()).replace(" ", "-")
            n, base = 1, slug
            while slug in out:
                slug, n = f"{base}-{n}", n + 1
            out.add(slug)
    return out


def broken_anchors(page: Path) -> list[str]:
    """Links of ``page`` to a #fragment that no heading of the target Markdown page makes."""
    bad = []
    for t in relative_links(page.read_text(encoding="utf-8"), fragments=True):
        path, _, frag = t.partition("#")
        target = page if not path else page.parent / path
        if frag and target.suffix == ".md" and target.exists() and frag not in anchors(target):
            bad.append(t)
    return bad


def test_the_committed_suite_reference_is_generated_from_the_schema():
    committed = (ROOT / "docs" / "suite-reference.md").read_text(encoding="utf-8")
    assert committed == render(), ("docs/suite-reference.md is stale: run "
                                   "python -m fwlab.suites.reference > docs/suite-reference.md (or make docs)")


def test_a_changed_description_makes_the_reference_stale():
    class Changed(Suite):
        seed: int = Field(1, description="a description the committed page does not have")

    assert "a description the committed page does not have" in render(Changed)
    assert render(Changed) != (ROOT / "docs" / "suite-reference.md").read_text(encoding="utf-8")


def models():
    out, todo = [], [Suite]
    while todo:
        m = todo.pop()
        out.append(m)
        todo += [n for f in m.model_fields.values() if (n := nested_model(f.annotation)) and n not in out]
    return out


@pytest.mark.parametrize("model", models(), ids=lambda m: m.__name__)
def test_every_suite_key_has_a_description(model):
    missing = [name for name, f in model.model_fields.items() if not (f.description or "").strip()]
    assert not missing, f"{model.__name__}: keys without a description (the suite reference is generated from them): {missing}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_reaches_a_file(page):
    assert not broken_links(page), f"{page.relative_to(ROOT)} links to missing files: {broken_links(page)}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_to_a_section_names_a_heading(page):
    assert not broken_anchors(page), f"{page.relative_to(ROOT)} links to missing sections: {broken_anchors(page)}"


def test_the_link_check_finds_a_missing_file(tmp_path):
    (tmp_path / "there.md").write_text("x")
    page = tmp_path / "page.md"
    page.write_text("[ok](there.md#part) [gone](missing.md) [web](https://example.org/x) [here](#top)\n"
                    "<img src=\"img/none.png\"> `[code](not-a-link.md)`\n```\n[fenced](nor-this.md)\n```\n")
    assert broken_links(page) == ["missing.md", "img/none.png"]


def test_the_anchor_check_finds_a_missing_section(tmp_path):
    (tmp_path / "there.md").write_text("# Title\n## The `run` command (fwlab run --ruleset)\n## Title\n")
    page = tmp_path / "page.md"
    page.write_text("[a](there.md#the-run-command-fwlab-run---ruleset) [b](there.md#title-1) "
                    "[c](there.md#gone) [d](#nowhere)\n# Here\n[e](#here)\n")
    assert broken_anchors(page) == ["there.md#gone", "#nowhere"]
