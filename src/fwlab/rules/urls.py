"""Deterministic URL block lists for the application-proxy DUT (seed 002's URL blocker).

Owns: choosing N distinct blocked URLs (``host/path``, the form HAProxy's ``base`` sample has:
Host header + path, no scheme, no query), seeded. Entries never match test traffic: their hosts
are under ``.blocked.test`` and they end in ``.html``, while test objects are
``srvNN.fwlab.test/obj/<size>.bin``. Lengths vary (about 25 to 75 characters) like real lists;
a linear matcher visits every entry for every request that matches none.
Never touches the kernel or a proxy.
"""

from __future__ import annotations

import random
import string

from fwlab.errors import SuiteError

MAX_URLS = 200_000
_ALNUM = string.ascii_lowercase + string.digits
_WORDS = ("news", "shop", "img", "casino", "bet", "poker", "media", "video", "forum", "blog", "deal",
          "free", "chat", "games", "pics", "adult", "drugs", "warez", "proxy", "tracker")


def block_list(count: int, seed: int = 1) -> list[str]:
    """``count`` distinct blocked URLs, deterministic for a seed."""
    if not 0 <= count <= MAX_URLS:
        raise SuiteError(f"block list size {count} is out of range", fix=f"use 0..{MAX_URLS}")
    rng = random.Random(f"fwlab-urls-{seed}")
    out: list[str] = []
    seen: set[str] = set()
    while len(out) < count:
        host = "".join(rng.choices(_ALNUM, k=rng.randint(4, 14)))
        sub = rng.choice(("www.", "", "m.", "cdn."))
        depth = rng.randint(0, 3)
        path = "/".join([rng.choice(_WORDS) for _ in range(depth)] + ["".join(rng.choices(_ALNUM, k=rng.randint(3, 16)))])
        url = f"{sub}{host}.blocked.test/{path}.html"
        if url not in seen:
            seen.add(url)
            out.append(url)
    return out


def blocked_example(seed: int = 1) -> str:
    """One URL of every non-empty list of this seed (its first entry), as an http:// URL."""
    return "http://" + block_list(1, seed)[0]
