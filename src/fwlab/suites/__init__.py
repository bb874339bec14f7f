"""Suites: the TOML schema (``schema``), the loader and built-ins (``loader``). The check against
the plug-ins and the expansion into an ordered trial plan (``plan``) sit on top of the other
layers: import them from ``fwlab.run.plan``."""

from fwlab.suites.loader import builtin_names, describe_builtins, load_suite, parse_suite
from fwlab.suites.schema import Suite, TrafficItem, check_cpus

__all__ = ["builtin_names", "describe_builtins", "load_suite", "parse_suite", "Suite", "TrafficItem",
           "check_cpus"]
