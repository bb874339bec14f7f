"""Minimal nft JSON documents for the rule-set model's unit tests (one builder, shared)."""

import json


def doc(*chains) -> str:
    """A minimal nft JSON document: chains given as (name, hook|None, type, prio, policy, [exprs])."""
    items = [{"table": {"family": "ip", "name": "t", "handle": 1}}]
    h = 1
    for name, hook, typ, prio, policy, rules in chains:
        c = {"family": "ip", "table": "t", "name": name, "handle": (h := h + 1)}
        if hook:
            c.update({"type": typ, "hook": hook, "prio": prio, "policy": policy})
        items.append({"chain": c})
        for expr in rules:
            items.append({"rule": {"family": "ip", "table": "t", "chain": name, "handle": (h := h + 1),
                                   "expr": expr}})
    return json.dumps({"nftables": items})


def m(left, right, op="=="):
    """One nft JSON match expression."""
    return {"match": {"op": op, "left": left, "right": right}}
