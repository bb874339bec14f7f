"""A line rate [bit/s], typed once where a suite names it ("100mbit") and carried so: the suite
model, the plan, the bed's key, the topology, the shaper and the trial identity all hold a
:class:`LineRate`. It is an ``int`` of bits/s, so a record stores it as the number it always
was (``link_rate_bps``), and it formats itself only where text is wanted: as tc writes it
(:attr:`LineRate.tc`, "100mbit", also in trial ids) or in words (:attr:`LineRate.words`,
"100 Mbit/s"). The suite keeps the text it was written as, so the suite's own record is
unchanged too.

Owns: parsing and formatting a line rate. Never shapes a link (testbed.shaping does).
"""

from __future__ import annotations

import re

_UNITS = {"bit": 1, "kbit": 10**3, "mbit": 10**6, "gbit": 10**9, "tbit": 10**12}
#: the rates fwlab shapes [bit/s]: tc's tbf below 64 kbit/s is all burst; above 400 Gbit/s no NIC
MIN_BPS, MAX_BPS = 64_000, 400 * 10**9


class LineRate(int):
    """A line rate [bit/s]; ``text``: as the suite wrote it (None: made from a number)."""

    text: str | None

    def __new__(cls, bps: int, text: str | None = None) -> LineRate:
        self = super().__new__(cls, bps)
        self.text = text
        return self

    @classmethod
    def parse(cls, text: str) -> LineRate:
        """A line rate as tc writes it ("100mbit", "1gbit", "2.5gbit", "64000bit"). ValueError
        (for the caller's one-line message) on anything else."""
        if not isinstance(text, str):
            raise ValueError(f"a rate is a string like \"100mbit\" or \"1gbit\", not {text!r}")
        m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?bit)\s*", text.lower())
        if not m:
            raise ValueError(f"'{text}' is not a rate: write it like \"100mbit\" or \"1gbit\"")
        bps = int(float(m[1]) * _UNITS[m[2]])
        if not MIN_BPS <= bps <= MAX_BPS:
            raise ValueError(f"rate {text} is outside 64kbit..400gbit")
        return cls(bps, text)

    @property
    def bps(self) -> int:
        """The rate as a plain number [bit/s]."""
        return int(self)

    @property
    def tc(self) -> str:
        """As tc writes it, in the largest whole unit: 100000000 -> '100mbit', 10**9 -> '1gbit'."""
        for unit, scale in (("gbit", 10 ** 9), ("mbit", 10 ** 6), ("kbit", 10 ** 3)):
            if self >= scale and self % scale == 0:
                return f"{self // scale}{unit}"
        return f"{int(self)}bit"

    @property
    def words(self) -> str:
        """'100 Mbit/s', '10 Gbit/s'."""
        return speed_words(self)

    # str(), repr() and f-strings give the number, as they did when the rate was a plain int
    def __reduce__(self):  # pickles (and copies) keep the type and the text
        return (LineRate, (int(self), self.text))


def speed_words(bps: float) -> str:
    """A link speed in words: '100 Mbit/s', '10 Gbit/s' (any rate: a NIC's speed too)."""
    return f"{bps / 1e9:g} Gbit/s" if bps >= 10 ** 9 else f"{bps / 1e6:g} Mbit/s"


def line_rate(value: int | None) -> LineRate | None:
    """A recorded ``link_rate_bps`` (a number; None or 0: unshaped) as a LineRate (None: unshaped)."""
    if not value:
        return None
    return value if isinstance(value, LineRate) else LineRate(int(value))
