"""The configuration of ``fwlab run --ruleset``: from the command line, or from a suite file's
``[ruleset]`` table.

Owns: the defaults (probe, rate and latency counts), the one config type
:class:`RulesetRunConfig`, and checking what a user wrote — each key's TOML type, ranges, the
interfaces, the class weights (or a mix file) — in one line naming the key and the fix, before
anything is built. Never reads the rule set itself (:func:`fwlab.ruleset.probe.read_input`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from fwlab.errors import SuiteError
from fwlab.ruleset.mix import check_weights, read_mix_file
from fwlab.ruleset.probe import DEFAULT_INTERFACES, parse_interfaces

PROBE_COUNT = 40  #: probe packets per class [packets]
RATE_COUNT = 100_000  #: frames per rate measurement (back to back at max)
LATENCY_COUNT = 20_000  #: frames per latency trial
COST_DURATION_S = 1.0  #: sending time of one class cost trial at its light load [s]
LATENCY_FRACTION = 0.5  #: latency trial load, share of the lower of the class's two rates in the round (RFC 2544 §26.2)


@dataclass
class RulesetRunConfig:
    ruleset: Path
    ipset: Path | None = None
    interfaces: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_INTERFACES))
    repetitions: int = 3
    rate_count: int = RATE_COUNT
    probe_count: int = PROBE_COUNT
    measure_rate: bool = True
    seed: int = 1
    latency_count: int = LATENCY_COUNT  #: frames per latency trial; 0: no latency
    latency_fraction: float = LATENCY_FRACTION
    class_weights: dict[str, float] | None = None  #: the user's mix profile (None: every class alike)
    mix_source: str | None = None  #: where the profile came from (a file, the suite)
    interfaces_given: bool = False  #: the user named the interfaces (else they are proposed from the rule set)
    measure_cost: bool = True  #: each class's time inside the firewall, timed in the kernel (methods.class_cost)
    cost_duration_s: float = COST_DURATION_S  #: sending time of one class cost trial [s]


RULESET_KEYS = ("file", "ipset", "interfaces", "rate_count", "probe_count", "measure_rate", "measure_cost",
                "cost_duration_s", "seed", "latency_count", "latency_fraction", "class_weights", "mix")


def _check_latency(count, fraction, where: str) -> None:
    """A latency trial's frame count and load fraction, checked before any arithmetic on them."""
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise SuiteError(f"{where}: latency_count must be a whole number >= 0 (0: no latency), not {count!r}",
                         fix="latency_count = 20000")
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 < fraction <= 1:
        raise SuiteError(f"{where}: latency_fraction must be a number in (0, 1] (share of the class's rate), "
                         f"not {fraction!r}", fix="latency_fraction = 0.5")


#: [ruleset] keys whose value must be a string / a bool / a table of strings (or a string)
_STRING_KEYS = ("file", "ipset")
_BOOL_KEYS = ("measure_rate", "measure_cost")


def _check_table_types(table: dict, where: str) -> None:
    """The [ruleset] table's file names, flags and interfaces are of the right TOML type (one line
    naming the key otherwise, never a TypeError further on)."""
    for k in _STRING_KEYS:
        if k in table and (not isinstance(table[k], str) or not table[k].strip()):
            raise SuiteError(f"{where}: {k} must be a file name (a string), not {table[k]!r}",
                             fix=f'{k} = "my-rules.{"nft" if k == "file" else "ipset"}"')
    for k in _BOOL_KEYS:
        if k in table and not isinstance(table[k], bool):
            raise SuiteError(f"{where}: {k} must be true or false, not {table[k]!r}", fix=f"{k} = false")
    ifs = table.get("interfaces")
    if ifs is not None and not isinstance(ifs, str) and not (
            isinstance(ifs, dict) and all(isinstance(v, str) for v in ifs.values())):
        raise SuiteError(f"{where}: interfaces must be a table NAME = ROLE (or \"NAME=ROLE,NAME=ROLE\"), "
                         f"not {ifs!r}", fix='interfaces = { eth0 = "client", eth1 = "server" }')


def config_from_args(ruleset: str, *, ipset: str | None = None, interfaces: str | None = None,
                     repetitions: int | None = None, no_rate: bool = False, mix: str | None = None,
                     latency_count: int | None = None) -> RulesetRunConfig:
    if repetitions is not None and repetitions < 1:
        raise SuiteError(f"--repetitions {repetitions} must be at least 1", fix="e.g. --repetitions 3")
    lc = LATENCY_COUNT if latency_count is None else latency_count
    _check_latency(lc, LATENCY_FRACTION, "--latency-count")
    return RulesetRunConfig(ruleset=Path(ruleset), ipset=Path(ipset) if ipset else None,
                            interfaces=parse_interfaces(interfaces) if interfaces else dict(DEFAULT_INTERFACES),
                            interfaces_given=bool(interfaces),
                            repetitions=repetitions or 3, measure_rate=not no_rate, measure_cost=not no_rate,
                            latency_count=lc,
                            class_weights=read_mix_file(Path(mix)) if mix else None,
                            mix_source=str(mix) if mix else None)


def config_from_suite_file(path: Path, repetitions: int | None = None) -> RulesetRunConfig | None:
    """A suite file whose [ruleset] table names a rule set -> its config; None when it has none."""
    from fwlab.files import loads_toml, read_text

    try:
        data = loads_toml(read_text(path, "suite file", SuiteError), "suite file", SuiteError)
    except SuiteError:
        return None  # the ordinary suite loader reports it
    table = data.get("ruleset")
    if table is None:
        return None
    where = f"suite {path.name} [ruleset]"
    if not isinstance(table, dict) or "file" not in table:
        raise SuiteError(f"{where} needs file = \"...\"", fix='[ruleset] file = "my-rules.nft"')
    unknown = sorted(set(table) - set(RULESET_KEYS))
    if unknown:
        raise SuiteError(f"{where} has unknown key(s) {', '.join(unknown)}", fix=f"use {', '.join(RULESET_KEYS)}")
    other = sorted(set(data) - {"ruleset", "name", "description", "repetitions"})
    if other:
        raise SuiteError(f"suite {path.name}: a [ruleset] suite takes only name, description, repetitions "
                         f"and [ruleset] (found {', '.join(other)})", fix="move the other keys to another suite")
    base = path.parent
    reps = repetitions or data.get("repetitions", 3)
    if isinstance(reps, bool) or not isinstance(reps, int) or reps < 1:
        raise SuiteError(f"suite {path.name}: repetitions must be a positive integer, not {reps!r}",
                         fix="repetitions = 3")
    _check_table_types(table, where)
    ints = {k: table[k] for k in ("rate_count", "probe_count", "seed") if k in table}
    bad = [k for k, v in ints.items() if isinstance(v, bool) or not isinstance(v, int) or v < 1]
    if bad:
        raise SuiteError(f"{where}: {bad[0]} must be a positive integer, not {ints[bad[0]]!r}",
                         fix=f"{bad[0]} = 100000")
    lat = {"latency_count": table.get("latency_count", LATENCY_COUNT),
           "latency_fraction": table.get("latency_fraction", LATENCY_FRACTION)}
    _check_latency(lat["latency_count"], lat["latency_fraction"], where)
    lat["latency_fraction"] = float(lat["latency_fraction"])  # checked: an int or float in (0, 1]
    dur = table.get("cost_duration_s", COST_DURATION_S)
    if isinstance(dur, bool) or not isinstance(dur, (int, float)) or not 0.2 <= dur <= 60:
        raise SuiteError(f"{where}: cost_duration_s must be a number of seconds in [0.2, 60], not {dur!r}",
                         fix="cost_duration_s = 1.0")
    if "class_weights" in table and "mix" in table:
        raise SuiteError(f"{where}: give class_weights or mix (a file), not both", fix="keep one of them")
    weights, source = None, None
    if "class_weights" in table:
        weights, source = check_weights(table["class_weights"], f"{where} class_weights"), f"suite {path.name}"
    elif "mix" in table:
        if not isinstance(table["mix"], str):
            raise SuiteError(f"{where}: mix must be a file name", fix='mix = "mix.toml"')
        weights, source = read_mix_file(base / table["mix"]), str(base / table["mix"])
    return RulesetRunConfig(
        class_weights=weights, mix_source=source, **lat,
        ruleset=base / table["file"], ipset=(base / table["ipset"]) if table.get("ipset") else None,
        interfaces=parse_interfaces(table.get("interfaces", DEFAULT_INTERFACES)), repetitions=reps,
        interfaces_given="interfaces" in table,
        measure_rate=table.get("measure_rate", True), measure_cost=table.get("measure_cost", True),
        cost_duration_s=float(dur), **ints)
