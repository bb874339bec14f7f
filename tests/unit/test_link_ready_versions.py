"""The build's link check proves the IP versions the bed is for (Topology.ip_versions): a bed
for IPv4 trials does not wait for IPv6, which comes up about 1 s later here. No root: the pings
are recorded by a fake host."""

from __future__ import annotations

import subprocess

import pytest

from fwlab.errors import TestbedError as BedError
from fwlab.testbed import Testbed, Topology


class PingHost:
    """Answers every ping; records the IP version of each."""

    remote = False

    def __init__(self) -> None:
        self.versions: list[int] = []

    def run(self, argv, ns=None, check=True, **kw):
        assert argv[0] == "ping"
        self.versions.append(int(argv[1].lstrip("-")))
        return subprocess.CompletedProcess(argv, 0, "", "")


@pytest.mark.parametrize("versions, pinged", [((4,), [4]), ((6,), [6]), ((4, 6), [4, 6]), ((6, 4), [4, 6])])
def test_link_check_pings_the_beds_ip_versions_only(versions, pinged):
    host = PingHost()
    bed = Testbed(Topology(run_id="t", ip_versions=versions), host=host)
    bed._wait_link_ready()
    assert sorted(host.versions) == pinged


def test_a_bed_checks_both_versions_unless_told():
    assert Topology(run_id="t").ip_versions == (4, 6)


@pytest.mark.parametrize("bad", [(), (5,), (4, 7)])
def test_ip_versions_outside_4_and_6_are_refused(bad):
    with pytest.raises(BedError):
        Topology(run_id="t", ip_versions=bad)


def test_the_run_builds_beds_for_the_suites_ip_versions():
    from fwlab.run.beds import topology
    from fwlab.suites import load_suite

    suite, _ = load_suite("quick")
    assert topology(suite, "routed").ip_versions == tuple(sorted(set(suite.ip_versions)))
    six = suite.model_copy(update={"ip_versions": [6, 4]})
    assert topology(six, "routed").ip_versions == (4, 6)
