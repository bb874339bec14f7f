import pytest

from fwlab.errors import BackendError
from fwlab.registry import Registry


def test_registry_lookup_errors_and_removal():
    r: Registry[int] = Registry("widget", BackendError)
    r.add("b", 2)
    r.add("a", 1)
    assert r.get("a") == 1 and r.names() == ["a", "b"] and list(r) == ["a", "b"] and "b" in r
    with pytest.raises(BackendError) as ei:
        r.get("c")
    assert ei.value.one_line() == "unknown widget 'c' (fix: use one of: a, b)"
    with pytest.raises(BackendError, match="registered twice"):
        r.add("a", 3)
    r.add("a", 1)  # the same object again is fine (module re-import)
    del r["a"]
    assert r.names() == ["b"] and len(r) == 1
