"""The flowtable support check agrees with the kernel: a flowtable loads in a real DUT namespace
exactly when fwlab says the nftables-flowtable backend is supported here."""

from fwlab.dut import DutContext, get_backend
from fwlab.dut.flowtable import flowtable_unsupported
from fwlab.errors import BackendError
from fwlab.rules import generate
from fwlab.testbed import Testbed, Topology, new_run_id


def test_flowtable_check_matches_the_kernel():
    with Testbed(Topology(run_id=new_run_id(), mode="routed")) as bed:
        be = get_backend("nftables-flowtable")
        ctx = DutContext(bed.host, bed.ns("dut"), "routed")
        rs = generate(10, "linear", client_net="198.18.1.0/24", server_net="198.19.1.0/24")
        text = be.render(rs, "routed").replace("@DEVICES@", f"{bed.topo.dut_client_if}, {bed.topo.dut_server_if}")
        cp = bed.host.run(["nft", "-f", "-"], ns=ctx.ns, input=text, check=False)
        why = flowtable_unsupported()
        assert (cp.returncode == 0) == (why is None), (cp.stderr, why)
        if why is None:
            return
        assert "NF_FLOW_TABLE" in why
        try:  # loading through the backend refuses with the reason, before touching the kernel
            be.load(ctx, rs)
        except BackendError as exc:
            assert why in exc.message
        else:
            raise AssertionError("nftables-flowtable loaded on a kernel said to lack flowtables")
