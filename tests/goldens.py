"""Where recorded tool outputs and runs live (tests/golden)."""

from pathlib import Path

GOLDEN = Path(__file__).resolve().parent / "golden"
