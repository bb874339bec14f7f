"""Root-only fixtures: real namespaces, real firewalls. Everything skips cleanly without root."""

import os
import pytest

from fwlab.testbed import list_fwl_namespaces, LocalHost

if os.geteuid() != 0:
    pytest.skip("tests/netns need root (network namespaces, nftables)", allow_module_level=True)


@pytest.fixture(autouse=True)
def no_leftovers():
    """Every netns test must leave no fwl- namespace of its own behind."""
    before = set(list_fwl_namespaces(LocalHost()))
    yield
    after = set(list_fwl_namespaces(LocalHost()))
    new = {n for n in after - before if not n.startswith("fwl-engdev-")}
    assert not new, f"test left namespaces behind: {sorted(new)}"
