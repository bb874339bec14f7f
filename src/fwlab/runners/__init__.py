"""Traffic runners, one module per tool: command line + output parser, chosen by name.

Every module of this package registers its runner(s) when imported; all are imported here, so
adding a tool is adding a module.
"""

import importlib as _importlib
import pkgutil as _pkgutil

from fwlab.runners.base import Measurement, Runner, TrafficSpec, TrialEnv, get_runner, runner_names

for _m in _pkgutil.iter_modules(__path__):
    if _m.name != "base":
        _importlib.import_module(f"{__name__}.{_m.name}")

__all__ = ["Measurement", "Runner", "TrafficSpec", "TrialEnv", "get_runner", "runner_names"]
