"""The `none` backend: the DUT forwards with no firewall loaded (the reference)."""

from __future__ import annotations

import platform

from fwlab.dut.base import COUNTER_CLASSES, Backend, DutContext, register
from fwlab.rules.model import RuleSet
from fwlab.testbed.host import LocalHost


class NoFirewall(Backend):
    name = "none"
    layouts = ("linear", "set")
    summary = "no firewall: plain forwarding/bridging, the 0-rule reference"
    platforms = None  # forwarding with nothing loaded: any DUT host
    clean_reset = True  # loads nothing: tests/netns/test_bed_reset.py

    def unsupported(self, layout: str, mode: str, stateful_shortcut: bool,
                    system: str | None = None) -> str | None:
        return None

    def bridge_nf_call(self, mode: str, rs: RuleSet) -> bool | None:
        return None if mode != "bridge" else False

    def render(self, rs: RuleSet, mode: str) -> str:
        return ""

    def _apply(self, ctx: DutContext, text: str, rs: RuleSet) -> None:
        pass

    def listing(self, ctx: DutContext) -> str:
        return ""

    def counters(self, ctx: DutContext) -> dict[str, int]:
        return {k: 0 for k in COUNTER_CLASSES}

    def flush(self, ctx: DutContext) -> None:
        pass

    def version(self, host: LocalHost) -> str:
        return f"linux {platform.release()}"


register(NoFirewall())
