"""Fixtures for the unit tests (no root)."""

import signal

import pytest


@pytest.fixture(autouse=True)
def _keep_signals():
    """fwlab.cli.main() installs SIGINT/SIGTERM handlers; give pytest its own back after each test."""
    saved = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGINT, saved[0])
    signal.signal(signal.SIGTERM, saved[1])
