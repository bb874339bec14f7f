"""fwlab's XDP program run in the kernel on synthetic frames (BPF_PROG_TEST_RUN, no attach): each
layout passes the permitted frame, drops a frame matching a deny entry and drops unlisted traffic."""

import pytest

from fwlab.dut.xdp_cost import test_run as xdp_run
from fwlab.rules import generate
from fwlab.testbed.topology import ROUTED_PLAN as P

OTHER = {4: "198.18.2.1", 6: "2001:2:0:3::1"}  # neither a deny source nor in the permitted nets


@pytest.mark.parametrize("ipv", [4, 6])
@pytest.mark.parametrize("layout", ["linear", "set"])
def test_program_verdicts(layout, ipv):
    n = 300
    rs = generate(n, layout, ip_version=ipv, client_net=P.client_net(ipv), server_net=P.server_net(ipv), seed=1)
    run = lambda **kw: xdp_run(n, layout, ip_version=ipv, repeat=1, seed=1, **kw).verdict  # noqa: E731
    assert run() == "pass"
    assert run(src=P.server(ipv), dst=P.client(ipv)) == "pass"  # the reverse permit
    for e in (rs.entries[0], rs.entries[n // 2], rs.entries[-1]):
        assert run(src=e.src, proto=e.proto, dport=e.dport) == "drop"
        # the entry matches its source only: the client sending to that protocol and port passes
        assert run(proto=e.proto, dport=e.dport) == "pass"
    assert run(src=OTHER[ipv]) == "drop"
