"""A remote DUT host's sysctls are read, never written (the safety rule): a bed fwlab built gets
the value set, a remote host with the needed value passes, one with another value is refused with
one line; the proxy backend, whose config is local, is refused on a remote DUT."""

import subprocess

import pytest

from fwlab.dut.base import DutContext, dut_sysctl
from fwlab.dut.proxy import Proxy
from fwlab.errors import BackendError


class FakeHost:
    def __init__(self, remote: bool, values: dict[str, str]):
        self.remote, self.name, self.values, self.argvs = remote, "fw1", values, []

    def run(self, argv, ns=None, check=True, **kw):
        self.argvs.append(argv)
        if argv[:2] == ["sysctl", "-n"]:
            v = self.values.get(argv[2])
            return subprocess.CompletedProcess(argv, 0 if v is not None else 1, (v or "") + "\n", "")
        key, _, val = argv[-1].partition("=")
        self.values[key] = val
        return subprocess.CompletedProcess(argv, 0, "", "")


def _ctx(host):
    return DutContext(host=host, ns="fwl-x-dut", mode="bridge")


KEY = "net.bridge.bridge-nf-call-iptables"


def test_a_local_bed_gets_the_value_set():
    h = FakeHost(False, {KEY: "0"})
    dut_sysctl(_ctx(h), KEY, "1")
    assert h.values[KEY] == "1"


def test_a_remote_host_with_the_value_is_only_read():
    h = FakeHost(True, {KEY: "1"})
    dut_sysctl(_ctx(h), KEY, "1")
    assert all(a[:2] == ["sysctl", "-n"] for a in h.argvs)


@pytest.mark.parametrize("values", [{KEY: "0"}, {}])
def test_a_remote_host_with_another_value_is_refused_and_left_alone(values):
    h = FakeHost(True, dict(values))
    with pytest.raises(BackendError) as e:
        dut_sysctl(_ctx(h), KEY, "1")
    assert "does not change a remote host" in str(e.value) and f"sysctl -w {KEY}=1" in e.value.one_line()
    assert h.values == values


def test_the_proxy_is_refused_on_a_remote_dut():
    assert "remote" in Proxy().unsupported("linear", "routed", True, system="Linux")
    assert Proxy().unsupported("linear", "routed", True) is None
