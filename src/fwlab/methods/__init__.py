"""Test methods built on the traffic tools of ``fwlab.runners``: the RFC 2544 searches
(``rfc2544``), connection capacity and rate (``connections``), many parallel streams framed by
recovery probes (``recovery``).

A method registers in the one runner registry (``fwlab.runners.get_runner``) like a tool does.
Every module of this package registers when imported; all are imported here, so importing
``fwlab.methods`` (the planner and the orchestrator do) makes every method known.
"""

import importlib as _importlib
import pkgutil as _pkgutil

for _m in _pkgutil.iter_modules(__path__):
    _importlib.import_module(f"{__name__}.{_m.name}")
