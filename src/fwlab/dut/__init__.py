"""Firewall backends for the device under test, one module per firewall, chosen by name.

``get_backend(name)`` returns a registered :class:`~fwlab.dut.base.Backend`. Every module of this
package registers its backend(s) when imported; all are imported here, so adding a firewall is
adding a module.
"""

import importlib as _importlib
import pkgutil as _pkgutil

from fwlab.dut.base import COUNTER_CLASSES, Backend, DutContext, LoadResult, backend_names, get_backend

for _m in _pkgutil.iter_modules(__path__):
    if _m.name != "base":
        _importlib.import_module(f"{__name__}.{_m.name}")

__all__ = ["COUNTER_CLASSES", "Backend", "DutContext", "LoadResult", "backend_names", "get_backend"]
