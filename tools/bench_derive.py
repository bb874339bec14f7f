"""Time the derivation of traffic classes from large rule sets (prints figures; asserts nothing).

Rule sets: fwlab's ClassBench-style ACL (fwlab.rules.classbench, N rules) and kube-proxy's
nftables mode (fwlab.rules.kubeproxy, N Services x 2 endpoints), rendered by the nftables
backend, loaded into a throw-away network namespace (``unshare --net nft -f``, as root, under the
shared lock /tmp/fwlab-live.lock for the fraction of a second it takes; a user namespace's netlink
buffer refuses batches of a few hundred rules) and read back with ``nft -j list ruleset`` -- the
JSON fwlab reads from a DUT. Then parse + derive, timed.

    PYTHONPATH=src python tools/bench_derive.py classbench 1000 2500 10000
    PYTHONPATH=src python tools/bench_derive.py kube-proxy 5000
"""

from __future__ import annotations

import subprocess
import sys
import time

from fwlab.dut import get_backend
from fwlab.rules.classbench import generate_classbench
from fwlab.rules.derive import BedAddresses, derive
from fwlab.rules.kubeproxy import generate_kube_proxy
from fwlab.rules.nft_json import parse_nft_json

BED = BedAddresses("eth0", "eth1", {4: "198.18.1.1", 6: "2001:2:0:1::1"}, {4: "198.19.1.1", 6: "2001:2:0:2::1"},
                   {4: "198.18.1.0/24", 6: "2001:2:0:1::/64"}, {4: "198.19.1.0/24", 6: "2001:2:0:2::/64"},
                   ("198.18.1.254", "198.19.1.254", "2001:2:0:1::fe", "2001:2:0:2::fe"))


def nft_json(text: str) -> str:
    cp = subprocess.run(["flock", "/tmp/fwlab-live.lock", "unshare", "--net", "sh", "-c",
                         "nft -f /dev/stdin && nft -j list ruleset"], input=text, capture_output=True, text=True)
    if cp.returncode != 0:
        sys.exit(f"nft refused the rule set: {cp.stderr.strip()[:300]}")
    return cp.stdout


def main() -> None:
    kind, sizes = sys.argv[1], [int(x) for x in sys.argv[2:]]
    for n in sizes:
        if kind == "classbench":
            rs = generate_classbench(n, server_addr="198.19.1.1", port=5555)
        else:
            rs = generate_kube_proxy(n, endpoints=2, server_addr="198.19.1.1", port=5555)
        text = get_backend("nftables").render(rs, "routed")
        doc = nft_json(text)
        t0 = time.perf_counter()
        model = parse_nft_json(doc)
        t1 = time.perf_counter()
        d = derive(model, BED)
        t2 = time.perf_counter()
        rules = sum(len(c.rules) for c in model.chains.values())
        print(f"{kind} n={n}: {rules} model rules; parse {t1 - t0:.2f} s, derive {t2 - t1:.2f} s; "
              f"{len(d.classes)} classes, {len(d.not_covered)} not covered", flush=True)


if __name__ == "__main__":
    main()
