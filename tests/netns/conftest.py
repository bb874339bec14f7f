"""Root-only fixtures: real namespaces, real firewalls. Everything skips cleanly without root."""

import os

import pytest

from fwlab.testbed import LocalHost, list_fwl_namespaces
from fwlab.testbed.bed import LIVE_NAMESPACES

if os.geteuid() != 0:
    pytest.skip("tests/netns need root (network namespaces, nftables)", allow_module_level=True)


@pytest.fixture(autouse=True)
def no_leftovers():
    """Every namespace a test's test beds created must be gone when the test ends (other runs on
    the same machine may have their own fwl- namespaces; those are not this test's business)."""
    yield
    still = sorted(ns for ns in LIVE_NAMESPACES if ns in set(list_fwl_namespaces(LocalHost())))
    LIVE_NAMESPACES.clear()
    assert not still, f"test left namespaces behind: {still}"
