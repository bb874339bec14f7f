"""Checks on the test tree itself."""

from collections import Counter
from pathlib import Path


def test_test_files_have_unique_basenames():
    """tests/ has no __init__.py files: pytest imports test modules by basename, so a unit test
    and a netns test with the same file name cannot be collected in one run."""
    root = Path(__file__).resolve().parents[1]
    names = Counter(p.name for p in root.rglob("test_*.py"))
    assert [n for n, c in names.items() if c > 1] == []
