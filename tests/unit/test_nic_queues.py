"""NIC queues (ethtool -l) and IRQ affinity (/proc/interrupts, msi_irqs, smp_affinity_list):
parsed from recorded command output, read through a fake host, shown in the report."""

import subprocess

from fwlab.report import nics as nics_report
from fwlab.testbed.nic import irqs_from, parse_ethtool_l, parse_interrupts, read_nic

ETHTOOL_L_I40E = """Channel parameters for enp1s0f0:
Pre-set maximums:
RX:		n/a
TX:		n/a
Other:		1
Combined:	8
Current hardware settings:
RX:		n/a
TX:		n/a
Other:		1
Combined:	4
"""
ETHTOOL_L_VETH = """Channel parameters for eth0:
Pre-set maximums:
RX:		2
TX:		2
Other:		n/a
Combined:	n/a
Current hardware settings:
RX:		1
TX:		1
Other:		n/a
Combined:	n/a
"""
INTERRUPTS = """           CPU0       CPU1       CPU2       CPU3
  0:         45          0          0          0   IO-APIC   2-edge      timer
 41:          1          0          0          0  PCI-MSIX-0000:01:00.0   0-edge      i40e-0000:01:00.0:misc
 42:      12000          3          0          0  PCI-MSIX-0000:01:00.0   1-edge      enp1s0f0-TxRx-0
 43:          0      11000          0          0  PCI-MSIX-0000:01:00.0   2-edge      enp1s0f0-TxRx-1
 44:          0          0          7          0  PCI-MSIX-0000:01:00.1   1-edge      enp1s0f1-TxRx-0
 37:          0          0          0          0  PCI-MSIX-0000:00:03.0   0-edge      virtio2-config
 38:          0      79925          0          0  PCI-MSIX-0000:00:03.0   1-edge      virtio2-input.0
NMI:          0          0          0          0   Non-maskable interrupts
"""


def script_out(dev: str, msi: str | None, aff: dict[int, str]) -> str:
    out = [f"DEV {dev}"] + ([f"MSI {msi}"] if msi is not None else []) + ["INTERRUPTS", *INTERRUPTS.splitlines(),
                                                                        "AFFINITY"]
    return "\n".join(out + [f"{n} {c}" for n, c in aff.items()]) + "\n"


def test_ethtool_l_current_and_maximum_channels_na_is_none():
    assert parse_ethtool_l(ETHTOOL_L_I40E) == {"max": {"rx": None, "tx": None, "other": 1, "combined": 8},
                                               "current": {"rx": None, "tx": None, "other": 1, "combined": 4}}
    assert parse_ethtool_l(ETHTOOL_L_VETH)["current"] == {"rx": 1, "tx": 1, "other": None, "combined": None}
    assert parse_ethtool_l("netlink error: Operation not supported") is None


def test_proc_interrupts_counts_per_cpu_and_name():
    t = parse_interrupts(INTERRUPTS)
    assert t[42] == {"name": "enp1s0f0-TxRx-0", "per_cpu": [12000, 3, 0, 0],
                     "line": "PCI-MSIX-0000:01:00.0 1-edge enp1s0f0-TxRx-0"}
    assert "NMI" not in t and 0 in t


def test_irqs_of_a_physical_nic_by_msi_vectors_and_name_with_affinity():
    got, why = irqs_from("enp1s0f0", script_out("0000:01:00.0", "41 42 43", {41: "0-3", 42: "0", 43: "1", 44: "2"}))
    assert why is None
    assert [(i["irq"], i["name"], i["affinity"]) for i in got] == [
        (41, "i40e-0000:01:00.0:misc", "0-3"), (42, "enp1s0f0-TxRx-0", "0"), (43, "enp1s0f0-TxRx-1", "1")]
    # no MSI directory: found by name only (the sibling port's IRQ 44 is not this one's)
    got, _ = irqs_from("enp1s0f0", script_out("0000:01:00.0", None, {42: "0", 43: "1"}))
    assert [i["irq"] for i in got] == [42, 43]
    # virtio: the IRQs are named after the virtio device, not the interface
    got, _ = irqs_from("eth0", script_out("virtio2", None, {37: "0-3", 38: "1"}))
    assert [(i["irq"], i["affinity"]) for i in got] == [(37, "0-3"), (38, "1")]


def test_irqs_missing_with_the_reason():
    got, why = irqs_from("eth9", script_out("0000:09:00.0", "", {}))
    assert got is None and "no IRQ of eth9" in why
    got, why = irqs_from("ifb0", "NODEVICE\n")
    assert got is None and "no device behind it" in why


class FakeHost:
    remote = True

    def __init__(self, answers):
        self.answers, self.calls = answers, []

    def run(self, argv, ns=None, check=True, timeout_s=None, **kw):
        self.calls.append(argv)
        rc, out, err = next((v for k, v in self.answers.items() if " ".join(argv).startswith(k)), (1, "", "nope"))
        return subprocess.CompletedProcess(argv, rc, out, err)


def test_read_nic_veth_queues_and_irqs_missing_with_reason():
    host = FakeHost({"ethtool -i": (0, "driver: veth\nversion: 1.0\n", ""), "cat /sys": (0, "10000\n", ""),
                     "ethtool -k": (0, "Features for eth0:\n", ""), "ethtool -l": (0, ETHTOOL_L_VETH, "")})
    n = read_nic(host, None, "client", "eth0")
    assert n.queues["current"]["rx"] == 1 and n.queues_missing is None
    assert n.irqs is None and n.irqs_missing == "veth is a virtual interface without IRQs"
    assert not any(a[0] == "sh" for a in host.calls)  # no IRQ lookup for a virtual interface


def test_read_nic_physical_records_queues_and_irqs():
    host = FakeHost({"ethtool -i": (0, "driver: i40e\nfirmware-version: 8.70\nbus-info: 0000:01:00.0\n", ""),
                     "cat /sys": (0, "10000\n", ""), "ethtool -k": (0, "", ""), "ethtool -l": (0, ETHTOOL_L_I40E, ""),
                     "sh -c": (0, script_out("0000:01:00.0", "41 42 43", {41: "0-3", 42: "0", 43: "1"}), "")})
    n = read_nic(host, "ns1", "dut", "enp1s0f0")
    assert n.speed_mbps == 10000 and n.queues["current"]["combined"] == 4
    assert [i["irq"] for i in n.irqs] == [41, 42, 43] and n.irqs_missing is None
    # ethtool -l not supported: missing, with the tool's words
    host.answers["ethtool -l"] = (1, "", "netlink error: Operation not supported\n")
    n = read_nic(host, "ns1", "dut", "enp1s0f0")
    assert n.queues is None and n.queues_missing == "ethtool -l enp1s0f0: netlink error: Operation not supported"


def test_report_table_shows_queues_and_irq_affinity_or_why_missing():
    bed = {"topology": {"run_id": "abc"}, "nics": [
        {"role": "dut", "iface": "enp1s0f0", "driver": "i40e", "firmware": "8.70", "speed_mbps": 10000,
         "queues": parse_ethtool_l(ETHTOOL_L_I40E), "irqs": [{"irq": 42, "name": "enp1s0f0-TxRx-0", "affinity": "0"}]},
        {"role": "client", "iface": "eth0", "driver": "veth", "speed_mbps": None,
         "speed_missing": "veth is a virtual interface without a line rate", "queues": parse_ethtool_l(ETHTOOL_L_VETH),
         "irqs": None, "irqs_missing": "veth is a virtual interface without IRQs"}]}
    page = nics_report.render([bed])
    assert "combined 4/8, other 1/1" in page and "42 enp1s0f0-TxRx-0 → CPU 0" in page
    assert "rx 1/2, tx 1/2" in page and "missing: veth is a virtual interface without IRQs" in page
    assert "10000 Mbit/s" in page and "firmware 8.70" in page
    assert nics_report.render([{"nics": []}]) == ""


def test_trial_lines_keep_the_irqs_without_their_per_cpu_counts():
    from fwlab.testbed.nic import NicInfo, trial_nic

    got, _ = irqs_from("enp1s0f0", script_out("0000:01:00.0", "41 42", {41: "0-3", 42: "0"}))
    nic = NicInfo(role="dut", iface="enp1s0f0", driver="i40e", irqs=got).to_dict()
    assert all("per_cpu" in i for i in nic["irqs"])  # the bed's description (run.json) keeps them
    t = trial_nic(nic)
    assert t["irqs"][:2] == [{"irq": 41, "name": "i40e-0000:01:00.0:misc", "affinity": "0-3"},
                             {"irq": 42, "name": "enp1s0f0-TxRx-0", "affinity": "0"}]
    assert len(t["irqs"]) == len(nic["irqs"]) and not any("per_cpu" in i for i in t["irqs"])
    assert {k: v for k, v in t.items() if k != "irqs"} == {k: v for k, v in nic.items() if k != "irqs"}
    assert nic["irqs"][0]["per_cpu"] == [1, 0, 0, 0]  # the stored NIC is not changed
    veth = NicInfo(role="client", iface="eth0", irqs_missing="veth is a virtual interface without IRQs").to_dict()
    assert trial_nic(veth) == veth


def test_the_host_wide_irq_table_is_read_once_per_host_not_per_interface():
    from fwlab.testbed import Testbed, Topology

    table = "\n".join(["INTERRUPTS", *INTERRUPTS.splitlines(), "AFFINITY", "42 0", "43 1"]) + "\n"
    host = FakeHost({"ethtool -i": (0, "driver: i40e\nbus-info: 0000:01:00.0\n", ""), "cat /sys": (0, "10000\n", ""),
                     "ethtool -k": (0, "", ""), "ethtool -l": (0, ETHTOOL_L_I40E, ""),
                     "sh -c d=": (0, "DEV 0000:01:00.0\nMSI 41 42 43\n", ""), "sh -c echo INTERRUPTS": (0, table, "")})
    bed = Testbed(Topology(run_id="t1", mode="routed"), host=host)
    nics = bed.nics()
    assert len(nics) == 4 and all(n.irqs and n.irqs_missing is None for n in nics)
    device = [a for a in host.calls if a[:2] == ["sh", "-c"] and a[2].startswith("d=")]
    tables = [a for a in host.calls if a[:2] == ["sh", "-c"] and a[2].startswith("echo INTERRUPTS")]
    assert len(device) == 4 and len(tables) == 1  # per interface: its device; per host: the table
    assert [(i["irq"], i["affinity"]) for i in nics[0].irqs] == [(41, None), (42, "0"), (43, "1")]
    # the table unreadable: every interface says so
    host.answers["sh -c echo INTERRUPTS"] = (1, "", "sh: cat: Permission denied")
    assert all("reading the IRQs" in n.irqs_missing and "Permission denied" in n.irqs_missing for n in bed.nics())
