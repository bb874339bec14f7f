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


def relative_links(text: str) -> list[str]:
    """The relative link targets of a Markdown text (no URLs, no in-page anchors, none in code)."""
    text = CODE.sub("", FENCE.sub("", text))
    out = []
    for m in LINK.finditer(text):
        target = m.group(1) or m.group(2)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue
        out.append(target.split("#", 1)[0])
    return out


def broken_links(page: Path) -> list[str]:
    return [t for t in relative_links(page.read_text(encoding="utf-8")) if not (page.parent / t).exists()]


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


def test_the_link_check_finds_a_missing_file(tmp_path):
    (tmp_path / "there.md").write_text("x")
    page = tmp_path / "page.md"
    page.write_text("[ok](there.md#part) [gone](missing.md) [web](https://example.org/x) [here](#top)\n"
                    "<img src=\"img/none.png\"> `[code](not-a-link.md)`\n```\n[fenced](nor-this.md)\n```\n")
    assert broken_links(page) == ["missing.md", "img/none.png"]
