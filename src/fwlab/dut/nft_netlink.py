"""Reading nftables' rule counters and rule-set generation straight from the kernel (netlink).

Owns: a netlink socket opened inside a local network namespace, the nf_tables generation id
(``NFT_MSG_GETGEN``: the kernel bumps it on every committed change of the namespace's rule set,
so an unchanged id proves an unchanged rule set), and a dump of every rule's tag (its comment)
and packet counter (``NFT_MSG_GETRULE``). Why: ``nft list ruleset`` costs ~1-2 s at 10,000 linear
rules on this host (nft prints every rule), while the kernel's dump of the same rules takes
milliseconds. Local namespaces only (a remote DUT is read with ``nft``); any failure here is
:class:`NetlinkUnavailable` and the caller falls back to ``nft``.
"""

from __future__ import annotations

import ctypes
import os
import socket
import struct
import threading

NETLINK_NETFILTER = 12
NFNL_SUBSYS_NFTABLES = 10
NFT_MSG_GETRULE = 7
NFT_MSG_GETGEN = 16
NLM_F_REQUEST, NLM_F_DUMP = 0x1, 0x300
NLMSG_ERROR, NLMSG_DONE = 2, 3
NFTA_RULE_EXPRESSIONS, NFTA_RULE_USERDATA = 4, 7
NFTA_LIST_ELEM, NFTA_EXPR_NAME, NFTA_EXPR_DATA = 1, 1, 2
NFTA_COUNTER_PACKETS = 2
NFTA_GEN_ID = 1
NFTNL_UDATA_RULE_COMMENT = 0
CLONE_NEWNET = 0x40000000


class NetlinkUnavailable(Exception):
    """This namespace cannot be read over netlink here (the caller uses ``nft`` instead)."""


def attrs(buf: bytes) -> list[tuple[int, bytes]]:
    """Netlink attributes (type without the nested/byte-order flags, payload)."""
    out, i = [], 0
    while i + 4 <= len(buf):
        ln, typ = struct.unpack_from("=HH", buf, i)
        if ln < 4:
            break
        out.append((typ & 0x3FFF, buf[i + 4:i + ln]))
        i += (ln + 3) & ~3
    return out


def rule_comment(udata: bytes) -> str:
    """The comment in a rule's user data (libnftnl's type-length-value list)."""
    i = 0
    while i + 2 <= len(udata):
        typ, ln = udata[i], udata[i + 1]
        if typ == NFTNL_UDATA_RULE_COMMENT:
            return udata[i + 2:i + 2 + ln].split(b"\0", 1)[0].decode(errors="replace")
        i += 2 + ln
    return ""


_HDR = struct.Struct("=HH").unpack_from
_U64_BE = struct.Struct(">Q").unpack_from
#: an expression's first attribute when it is a counter: NFTA_EXPR_NAME (length 12) "counter\0"
_COUNTER_NAME_ATTR = struct.pack("=HH", 12, NFTA_EXPR_NAME) + b"counter\0"


def _counter_packets(payload: bytes, j: int, end: int) -> int | None:
    """Packets of the expression (NFTA_LIST_ELEM) at ``j`` if it is a counter, else None."""
    k = j + 4
    if not payload.startswith(_COUNTER_NAME_ATTR, k):
        return None  # the kernel writes an expression's name first (nf_tables_fill_expr_info): another one
    k += 12
    while k + 4 <= end:  # NFTA_EXPR_DATA, then NFTA_COUNTER_BYTES / _PACKETS inside it
        aln, atyp = _HDR(payload, k)
        if aln < 4:
            return None
        if atyp & 0x3FFF == NFTA_EXPR_DATA:
            d, dend = k + 4, min(end, k + aln)
            while d + 4 <= dend:
                dln, dtyp = _HDR(payload, d)
                if dln < 4:
                    return None
                if dtyp & 0x3FFF == NFTA_COUNTER_PACKETS and dln >= 12:
                    return _U64_BE(payload, d + 4)[0]
                d += (dln + 3) & ~3
            return None
        k += (aln + 3) & ~3
    return None


def rule_tag_packets(payload: bytes) -> tuple[str, int] | None:
    """One NEWRULE message's payload (after nfgenmsg) -> (comment, packets of its counter), or
    None when the rule has no counter. Walks the attributes in place (offsets, no copies) and
    looks into an expression only when its name is ``counter``: at 10,000 rules this runs once
    per trial; walking every attribute with :func:`attrs` takes about 1.5 x as long (0.139 s against
    0.092 s in place, one measurement on this host; noisy under load)."""
    comment, packets = "", None
    n, i = len(payload), 0
    while i + 4 <= n:
        ln, typ = _HDR(payload, i)
        if ln < 4:
            break
        end = min(n, i + ln)
        typ &= 0x3FFF
        if typ == NFTA_RULE_USERDATA:
            comment = rule_comment(payload[i + 4:end])
        elif typ == NFTA_RULE_EXPRESSIONS:
            j = i + 4
            while j + 4 <= end:  # one NFTA_LIST_ELEM per expression
                eln = _HDR(payload, j)[0]
                if eln < 4:
                    break
                p = _counter_packets(payload, j, min(end, j + eln))
                if p is not None:
                    packets = (packets or 0) + p
                j += (eln + 3) & ~3
        i += (ln + 3) & ~3
    return None if packets is None else (comment, packets)


def messages(buf: bytes) -> list[tuple[int, bytes]]:
    """(type, payload after nlmsghdr) of each netlink message in ``buf``."""
    out, i = [], 0
    while i + 16 <= len(buf):
        ln, typ = struct.unpack_from("=IH", buf, i)
        if ln < 16:
            break
        out.append((typ, buf[i + 16:i + ln]))
        i += (ln + 3) & ~3
    return out


def open_socket(ns: str) -> socket.socket:
    """A NETLINK_NETFILTER socket in namespace ``ns`` (/run/netns/NS), made on a helper thread
    that alone enters the namespace (a socket stays in the namespace it was made in)."""
    path = f"/run/netns/{ns}"
    box: dict = {}

    def make() -> None:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            fd = os.open(path, os.O_RDONLY)
            try:
                if libc.setns(fd, CLONE_NEWNET) != 0:
                    raise OSError(ctypes.get_errno(), "setns")
            finally:
                os.close(fd)
            box["sock"] = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
        except (OSError, AttributeError) as exc:
            box["error"] = exc

    t = threading.Thread(target=make, daemon=True)
    t.start()
    t.join(5.0)
    if "sock" not in box:
        raise NetlinkUnavailable(f"no netlink socket in namespace {ns}: {box.get('error', 'timeout')}")
    box["sock"].settimeout(5.0)
    return box["sock"]


def _request(sock: socket.socket, msg: int, flags: int, seq: int) -> list[tuple[int, bytes]]:
    hdr = struct.pack("=IHHII", 16 + 4, (NFNL_SUBSYS_NFTABLES << 8) | msg, NLM_F_REQUEST | flags, seq, 0)
    sock.send(hdr + struct.pack("=BBH", socket.AF_UNSPEC, 0, 0))
    out: list[tuple[int, bytes]] = []
    while True:
        try:
            buf = sock.recv(1 << 20)
        except OSError as exc:
            raise NetlinkUnavailable(f"netlink read failed: {exc}") from exc
        done = not (flags & NLM_F_DUMP)
        for typ, payload in messages(buf):
            if typ == NLMSG_DONE:
                done = True
            elif typ == NLMSG_ERROR:
                err = struct.unpack_from("=i", payload)[0] if len(payload) >= 4 else -1
                if err != 0:
                    raise NetlinkUnavailable(f"netlink error {err}")
                done = True
            else:
                out.append((typ, payload[4:]))  # after nfgenmsg
        if done:
            return out


class NftNetlink:
    """One namespace's nf_tables, read over netlink (open once, read many times)."""

    def __init__(self, ns: str) -> None:
        self.sock = open_socket(ns)
        self.seq = 0

    def close(self) -> None:
        self.sock.close()

    def genid(self) -> int:
        self.seq += 1
        for typ, payload in _request(self.sock, NFT_MSG_GETGEN, 0, self.seq):
            for a, val in attrs(payload):
                if a == NFTA_GEN_ID and len(val) >= 4:
                    return struct.unpack(">I", val[:4])[0]
        raise NetlinkUnavailable("no generation id in the kernel's answer")

    def rule_counters(self) -> list[tuple[str, int]]:
        """(comment, packets) of every rule with a counter, in every table of the namespace."""
        self.seq += 1
        out = []
        for typ, payload in _request(self.sock, NFT_MSG_GETRULE, NLM_F_DUMP, self.seq):
            tp = rule_tag_packets(payload)
            if tp is not None:
                out.append(tp)
        return out
