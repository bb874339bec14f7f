"""The report reads as a document: a table of contents, the answer (overview, per-rule cost) before
the details, settings in words (not Python dicts), a missing figure's reason said once, and CPU
use of routed and bridge beds never pooled."""

from __future__ import annotations

import copy
import json
import re
import shutil
from pathlib import Path

from fwlab.report import write_report

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
NIC = {"role": "dut", "iface": "eth0", "driver": "veth", "speed_mbps": None,
       "speed_missing": "veth is a virtual interface without a line rate", "queues": None,
       "queues_missing": "veth reports no channels", "irqs": None,
       "irqs_missing": "veth is a virtual interface without IRQs"}


def _record(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(GOLDEN / "run-tiny", run)
    meta = json.loads((run / "run.json").read_text())
    bed = meta["beds"][0]
    bed["nics"] = [dict(NIC, role=r, iface=i) for r in ("client", "dut", "server") for i in ("eth0", "eth1")]
    meta["beds"].append(copy.deepcopy(bed))
    (run / "run.json").write_text(json.dumps(meta))
    rfc = json.loads((GOLDEN / "kinds" / "rfc2544.json").read_text())
    lines = (run / "trials.jsonl").read_text().splitlines()
    for mode in ("routed", "bridge"):
        t = copy.deepcopy(rfc)
        t.update(mode=mode, trial_id=f"{rfc['trial_id']}-{mode}")
        lines.append(json.dumps(t))
    (run / "trials.jsonl").write_text("\n".join(lines) + "\n")
    return run


def test_contents_answer_first_words_and_reasons_once(tmp_path):
    page = write_report(_record(tmp_path)).read_text()
    toc = re.search(r"<nav class='toc'>(.*?)</nav>", page, re.S)
    assert toc, "no table of contents"
    links = re.findall(r"href='#([^']+)'", toc.group(1))
    ids = re.findall(r"<h2 id='([^']+)'", page)
    assert links == ids and len(ids) >= 5 and len(set(ids)) == len(ids)
    assert page.index("<nav") < page.index("<h2 id='overview'")
    assert ids.index("per-rule-cost-of-linear-rule-sets") == 1  # right after the overview
    # settings in words
    assert "{'tso'" not in page and "'client_cpu'" not in page
    assert re.search(r"offloads (tso|gso|gro) (on|off)", page)
    # 12 interfaces x 3 missing figures: each reason said once
    for why in ("without a line rate", "reports no channels", "without IRQs"):
        assert page.count(why) == 1, why
    # the RFC 2544 CPU use: one group per mode
    assert "RFC 2544 search" in page and "(routed)" in page and "(bridge)" in page
    cpu = page[page.index("CPU use per role"):]
    rows = re.findall(r"<tr><td>([^<]*RFC 2544[^<]*)</td><td>[^<]*</td><td>(\d+)</td>", cpu)
    assert {r[0].rsplit("(", 1)[1] for r in rows} == {"routed)", "bridge)"} and all(n == "1" for _, n in rows)


def test_a_packet_rate_is_drawn_once(tmp_path):
    """UDP's figure is its packet rate: one plot per traffic, no second near-zero Gbit/s plot."""
    page = write_report(_record(tmp_path)).read_text()
    assert "UDP 64 B payload (routed): packet rate vs rule count" in page
    assert "UDP 64 B payload (routed): throughput vs rule count" not in page
    assert "TCP (routed): throughput vs rule count" in page
