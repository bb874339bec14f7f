"""What identifies one trial, defined once: ``TrialIdentity`` and the keys and labels made from it.

Owns: the identity fields (the suite's expansion writes them, the record stores them flat at the
top of each trial line, every reader groups by them), the trial-id format
(``ip4udp-64B-nftables-1000r-linear-sf-routed-r1``, read like FD.io CSIT test ids), the
configuration key (trials that share one loaded rule set), the bed key, the curve key (everything
but the rule count and the repetition) and the curve's labels. The functions take any mapping
with the identity fields (a trial line, a curve's fields), so readers of plain dicts and of
``TrialIdentity`` get the same answer. Never touches files, the kernel or statistics.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Annotated, Any

from pydantic import PlainSerializer, PlainValidator, WithJsonSchema

from fwlab.linerate import LineRate, line_rate, speed_words

#: a trial's emulated link rate: a LineRate in memory, its number [bit/s] (or null) in the record
LinkRateBps = Annotated[LineRate | None, PlainValidator(line_rate),
                        PlainSerializer(lambda r: None if r is None else int(r)),
                        WithJsonSchema({"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None,
                                        "title": "Link Rate Bps"})]

#: fields that identify a curve: everything but the rule count and the repetition
CURVE_FIELDS = ("mode", "backend", "layout", "stateful_shortcut", "ip_version", "traffic", "size_bytes", "streams",
                "label", "link_rate_bps")
#: the firewall configuration: trials with equal values share one loaded rule set
CONFIG_FIELDS = ("mode", "backend", "layout", "rules", "stateful_shortcut", "ip_version")
#: one test bed per mode, backend and emulated link rate
BED_FIELDS = ("mode", "backend", "link_rate_bps")


def background_id_part(background: Mapping) -> str:
    """A flood's trial-id part, e.g. ``udpflood9500pps`` or ``burst.synflood0pps`` (the flood
    names itself: ``FloodSpec.id_part``; imported here only when a trial has a flood)."""
    from fwlab.suites.background import FloodSpec

    return FloodSpec.from_dict(dict(background)).id_part


def _fields(t: Any) -> Mapping:
    """The identity fields of a trial line, a ``TrialIdentity`` dict or a ``TrialRecord`` (its
    ``identity`` plus its ``kind``)."""
    ident = getattr(t, "identity", None)
    if ident is not None:
        return {**ident.__dict__, "kind": str(t.kind)}
    return t


def trial_id(t: Mapping) -> str:
    """The trial id from the identity fields of ``t`` (a trial line or a ``TrialIdentity`` dict)."""
    t = _fields(t)
    size = f"{t['size_bytes']}B" if t.get("size_bytes") else "dflt"
    streams = t.get("streams") or 1
    st = f"-{streams}s" if streams > 1 else ""
    sc = "-sf" if t.get("stateful_shortcut") else ""
    lb = f"-{t['label']}" if t.get("label") else ""
    bg = f"-{background_id_part(t['background'])}" if t.get("background") else ""
    link = f"-{line_rate(t['link_rate_bps']).tc}" if t.get("link_rate_bps") else ""
    return (f"ip{t['ip_version']}{t['traffic']}{lb}-{size}{st}{bg}-{t['backend']}-{t['rules']}r-"
            f"{t['layout']}{sc}-{t['mode']}{link}-r{t['repetition']}")


def link_words(bps: LineRate | None) -> str:
    """'100 Mbit/s link' or 'unshaped bed' (a curve's or a table's emulated wire)."""
    if not bps:
        return "unshaped bed"
    return f"{speed_words(bps)} link"


def curve_key(t: Mapping) -> tuple:
    t = _fields(t)
    return tuple(t.get(f) for f in CURVE_FIELDS)


def config_key(t: Mapping) -> tuple:
    t = _fields(t)
    return tuple(t.get(f) for f in CONFIG_FIELDS)


def config_label(t: Mapping) -> str:
    """The firewall configuration of a curve, e.g. ``nftables linear +established [bulk]``."""
    t = _fields(t)
    if t.get("backend") == "none":
        return "none (no firewall)"
    if t.get("layout") == "none":  # a reference that loads no rules (e.g. xdp-pass)
        return f"{t.get('backend')} (no rules)"
    s = f"{t.get('backend')} {t.get('layout')}"
    if t.get("stateful_shortcut"):
        s += " +established"
    if t.get("label"):
        s += f" [{t['label']}]"
    return s


def size_words(size_bytes, traffic, kind) -> str:
    """'64 B frames' or '64 B payload': fwlab-engine (traffic engine, RFC 2544 and latency kinds)
    sizes Ethernet frames incl. FCS; iperf3, netperf and the other tools size the payload
    (datagram or write)."""
    framed = traffic == "engine" or str(kind) == "rfc2544"
    return f"{size_bytes} B {'frames' if framed else 'payload'}"


def traffic_label(t: Mapping, kind: str | None = None) -> str:
    """The traffic of a curve, e.g. ``IPv4 UDP 64 B payload x4 (routed)``; ``kind`` (default: the
    mapping's own) says whether the size is a frame or a payload."""
    t = _fields(t)
    kind = kind if kind is not None else t.get("kind")
    size = f" {size_words(t['size_bytes'], t.get('traffic'), kind)}" if t.get("size_bytes") else ""
    streams = f" x{t['streams']}" if (t.get("streams") or 1) > 1 else ""
    label = f" [{t['label']}]" if t.get("label") else ""
    link = f", {link_words(t['link_rate_bps'])}" if t.get("link_rate_bps") else ""
    return f"IPv{t.get('ip_version')} {str(t.get('traffic')).upper()}{label}{size}{streams} ({t.get('mode')}{link})"


@dataclass(frozen=True)
class TrialIdentity:
    """Everything that identifies one trial (the suite's expansion makes one per trial)."""

    suite: str
    mode: str
    backend: str
    layout: str
    rules: int
    stateful_shortcut: bool
    ip_version: int
    traffic: str
    tool: str
    size_bytes: int | None
    streams: int
    rate_bps: int | None
    duration_s: float
    repetition: int
    label: str | None = None  #: the traffic item's tag, part of the id
    options: dict = field(default_factory=dict, hash=False)  #: the traffic item's runner options
    background: dict | None = field(default=None, hash=False)  #: a flood beside the trial (FloodSpec dict)
    link_rate_bps: LinkRateBps = None  #: the emulated wires' line rate (suite ``link_rate``); None: unshaped

    @property
    def trial_id(self) -> str:
        return trial_id(self.__dict__)

    @property
    def config_key(self) -> tuple:
        """The firewall configuration: trials with equal keys share one loaded rule set."""
        return config_key(self.__dict__)

    @property
    def bed_key(self) -> tuple:
        return tuple(getattr(self, f) for f in BED_FIELDS)

    @property
    def curve_key(self) -> tuple:
        return curve_key(self.__dict__)

    @property
    def config_label(self) -> str:
        return config_label(self.__dict__)

    @property
    def traffic_label(self) -> str:
        return traffic_label(self.__dict__)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["trial_id"] = self.trial_id
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "TrialIdentity":
        """The identity fields of a trial line (others ignored; ``label``, ``options`` and
        ``background`` default as in records written before they existed)."""
        return cls(**{f: d[f] for f in IDENTITY_FIELDS if f in d})


#: the identity fields in record order (a trial line holds them flat, plus ``trial_id``)
IDENTITY_FIELDS = tuple(f.name for f in fields(TrialIdentity))
