"""The one reader of a namespace's kernel protocol counters (fwlab.testbed.netstat): the runners'
TCP segment count and the recovery method's TCP abort counters both read through it. No root."""

from __future__ import annotations

from types import SimpleNamespace

from fwlab.methods.recovery import tcp_aborts
from fwlab.runners.conn import tcp_segments_sent
from fwlab.testbed.netstat import NETSTAT, SNMP, parse_counters, read_counters

SNMP_TEXT = ("Ip: Forwarding DefaultTTL\nIp: 1 64\n"
             "Tcp: RtoAlgorithm ActiveOpens OutSegs OutRsts\nTcp: 1 12 3456 7\n"
             "Udp: InDatagrams\nUdp: 9\n")
NETSTAT_TEXT = ("TcpExt: TCPAbortOnTimeout TCPAbortOnMemory\nTcpExt: 4 0\n"
                "IpExt: InOctets\nIpExt: 100\n")


class Bed:
    """Answers `cat <path>` in any role with the given files (a missing one fails)."""

    def __init__(self, files: dict[str, str]):
        self.files = files
        self.read: list[tuple[str, str]] = []

    def sh(self, role, *argv, check=True):
        self.read.append((role, argv[-1]))
        text = self.files.get(argv[-1])
        return SimpleNamespace(returncode=0 if text is not None else 1, stdout=text or "", stderr="")


def test_one_protocols_counters_by_name():
    assert parse_counters(SNMP_TEXT, "Tcp") == {"RtoAlgorithm": 1, "ActiveOpens": 12, "OutSegs": 3456, "OutRsts": 7}
    assert parse_counters(SNMP_TEXT, "Udp") == {"InDatagrams": 9}
    assert parse_counters(NETSTAT_TEXT, "Tcp") == {}       # TcpExt is not Tcp
    assert parse_counters(NETSTAT_TEXT, "TcpExt") == {"TCPAbortOnTimeout": 4, "TCPAbortOnMemory": 0}


def test_both_callers_read_through_it():
    bed = Bed({SNMP: SNMP_TEXT, NETSTAT: NETSTAT_TEXT})
    assert read_counters(bed, "client", SNMP, "Tcp")["OutSegs"] == 3456
    assert tcp_segments_sent(bed, "server") == 3456
    assert tcp_aborts(bed, "client") == {"TCPAbortOnTimeout": 4, "TCPAbortOnMemory": 0}
    assert ("server", SNMP) in bed.read and ("client", NETSTAT) in bed.read
    # unreadable: None, never a guess
    empty = Bed({})
    assert read_counters(empty, "client", SNMP, "Tcp") is None
    assert tcp_segments_sent(empty, "client") is None and tcp_aborts(empty, "client") is None
    assert tcp_segments_sent(Bed({SNMP: "Ip: a\nIp: 1\n"}), "client") is None
