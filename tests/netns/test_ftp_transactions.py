"""FTP transactions through a real DUT: vsftpd in the server namespace, curl in the client's,
nftables with 100 rules between them (passive data connections included)."""

import shutil

import pytest

from fwlab.dut import DutContext, get_backend
from fwlab.rules import generate
from fwlab.runners import TrafficSpec, TrialEnv, get_runner
from fwlab.testbed import Testbed, Topology, new_run_id


def test_ftp_transactions_cross_100_rules():
    r = get_runner("curl")
    why = r.unavailable() or (None if shutil.which("vsftpd", path="/usr/sbin:/usr/bin") else "vsftpd is not installed")
    if why:
        pytest.skip(why)
    with Testbed(Topology(run_id=new_run_id(), mode="routed")) as bed:
        plan = bed.topo.plan
        be = get_backend("nftables")
        ctx = DutContext(bed.host, bed.ns("dut"), "routed")
        be.load(ctx, generate(100, "linear", ip_version=4, client_net=plan.client_net(4),
                              server_net=plan.server_net(4), stateful_shortcut=True))
        before = be.counters(ctx)
        spec = TrafficSpec(traffic="ftp", tool="curl", size_bytes=16000, streams=4, ip_version=4,
                           duration_s=1, options=r.check_options("ftp", {}))
        m = r.measure(bed, spec, TrialEnv(backend=be, dut=ctx))
        after = be.counters(ctx)
        r.stop(bed)
        left = bed.sh("server", "ss", "-ltnH", "sport = :21", check=False).stdout
    mm = m.metrics
    assert m.kind == "transactions"
    assert mm["transactions"] > 0 and mm["failure_pct"] == 0.0
    assert m.extra["by_protocol"]["ftp"]["transactions"] == mm["transactions"]
    # one login per transaction: a control and a passive data connection each
    assert mm["connections_per_transaction"] == 2.0
    # every byte of every object (ok = curl exit 0, 226, size_download == 16000)
    assert mm["throughput_bps"] == pytest.approx(mm["transactions"] * 16000 * 8 / mm["duration_s"])
    # both connections of each transaction walked the rule set to the permit
    assert after["permit"] - before["permit"] >= 2 * mm["transactions"]
    assert not left.strip()  # vsftpd stopped with the runner
