"""The kinds of trial the record holds: ``TrialKind``.

Owns: the list of kinds really written (a measurement names its kind, the orchestrator turns a
stream trial with a flood beside it into ``attack``) and which kinds form rule-count curves.
Later versions add kinds, never rename these. docs/record-format.md describes each.
"""

from __future__ import annotations

from enum import Enum


class TrialKind(str, Enum):
    """A trial line's ``kind``: which measurement envelope its ``metrics`` and ``extra`` follow."""

    STREAM = "stream"  #: iperf3/netperf/engine streams (throughput, packet rate, loss)
    RFC2544 = "rfc2544"  #: RFC 2544 throughput search, frame loss, back-to-back
    CONNECTIONS = "connections"  #: connection rate / capacity searches
    TRANSACTIONS = "transactions"  #: HTTP transactions (curl/nginx, request mixes)
    PARALLEL = "parallel"  #: many parallel streams with recovery probes
    ATTACK = "attack"  #: a stream trial with a flood beside it
    RTT = "rtt"  #: ping round-trip times
    RULESET_CLASS = "ruleset-class"  #: one traffic class of an imported rule set (fwlab run --ruleset)
    COST = "cost"  #: the firewall's own time per packet, timed in the DUT's kernel at a light load

    def __str__(self) -> str:
        return self.value


#: kinds whose figures form rule-count curves (the others have report sections of their own)
CURVE_KINDS = (TrialKind.STREAM.value, TrialKind.RFC2544.value)
#: every kind, as the strings stored in ``kind``
TRIAL_KINDS = tuple(k.value for k in TrialKind)
