"""Suites: the TOML schema (``schema``), the loader and built-ins (``loader``), and the
expansion into an ordered trial plan (``plan``)."""

from fwlab.suites.loader import builtin_names, describe_builtins, load_suite, parse_suite
from fwlab.suites.plan import Plan, TrialSpec, expand
from fwlab.suites.schema import Suite, TrafficItem, check_cpus

__all__ = ["builtin_names", "describe_builtins", "load_suite", "parse_suite", "Plan", "TrialSpec",
           "expand", "Suite", "TrafficItem", "check_cpus"]
