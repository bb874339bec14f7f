"""The proxy DUT: HAProxy in the DUT namespace forwards allowed URLs and denies blocked ones."""

import shutil

import pytest

from fwlab.dut import DutContext, get_backend
from fwlab.rules import generate
from fwlab.rules.urls import block_list
from fwlab.runners import TrafficSpec, TrialEnv, get_runner
from fwlab.testbed import Testbed, Topology, new_run_id

if not shutil.which("haproxy", path="/usr/sbin:/usr/bin:/sbin:/bin"):
    pytest.skip("haproxy is not installed (make system-deps)", allow_module_level=True)


def _get(bed, url, proxy=None):
    argv = ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code} %{size_download}", "--max-time", "2",
            "--resolve", "srv01.fwlab.test:80:198.19.1.1"]
    if proxy:
        argv += ["--proxy", proxy]
    cp = bed.sh("client", *argv, url, check=False)
    return cp.stdout.strip()


@pytest.mark.parametrize("layout,count", [("linear", 1000), ("set", 5000)])
def test_proxy_forwards_allowed_and_denies_blocked(layout, count):
    r = get_runner("curl")
    if r.unavailable():
        pytest.skip(r.unavailable())
    be = get_backend("proxy")
    with Testbed(Topology(run_id=new_run_id(), mode="routed")) as bed:
        plan = bed.topo.plan
        ctx = DutContext(bed.host, bed.ns("dut"), "routed")
        be.flush(ctx)
        res = be.load(ctx, generate(count, layout, client_net=plan.client_net(4), server_net=plan.server_net(4),
                                    stateful_shortcut=True))
        proxy = be.proxy_url(ctx, 4)
        # the whole list is loaded: the listing read back from HAProxy holds every entry
        assert be.listing(ctx).count(".blocked.test/") == count and res.family.startswith("haproxy")
        c0 = be.counters(ctx)
        m = r.measure(bed, TrafficSpec(traffic="http", tool="curl", size_bytes=16000, streams=4, duration_s=1,
                                       options=r.check_options("http", {})), TrialEnv(backend=be, dut=ctx))
        c1 = be.counters(ctx)
        allowed = _get(bed, "http://srv01.fwlab.test/obj/16000.bin", proxy)
        blocked = [_get(bed, "http://" + u, proxy) for u in (block_list(count)[0], block_list(count)[-1])]
        c2 = be.counters(ctx)
        bypass = _get(bed, "http://srv01.fwlab.test/obj/16000.bin")  # not through the proxy
        be.flush(ctx)
        after_flush = _get(bed, "http://srv01.fwlab.test/obj/16000.bin")
        r.stop(bed)
    assert m.extra["proxy"] == proxy and m.metrics["transactions"] > 0 and m.metrics["failure_pct"] == 0.0
    assert c1["permit"] - c0["permit"] >= m.metrics["transactions"] and c1["deny"] == c0["deny"]
    assert allowed == "200 16000"
    assert all(b.startswith("403") for b in blocked)
    assert c2["deny"] - c1["deny"] == 2 and c2["permit"] - c1["permit"] == 1
    assert bypass.startswith("000")          # the DUT does not forward while the proxy is loaded
    assert after_flush == "200 16000"        # flush stops the proxy and forwards again
