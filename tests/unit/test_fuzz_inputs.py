"""Property-based fuzzing of everything a user hands fwlab: suites, hosts files, records and
command lines, through the real entry point ``fwlab.cli.main(argv)`` in-process.

Every generated input must end with exit status 0 or 2, never a traceback (an exception escaping
``main``), and a failure must print exactly one line on stderr. Only side-effect-free commands
are used (``run --dry-run``, ``report``, ``export``, ``rules``, ``list``), in a temporary
directory; a record's ``run.json`` and ``trials.jsonl`` are byte for byte unchanged after every
command that reads it, and no network namespace appears on the host. Imported rule sets (iptables-save
text, nft JSON) are fuzzed through the parsers and the class derivation: only a FwlabError may leave
them. ``EXAMPLES`` sums the generated inputs (>= 1000 in the default run).

The big sweep: ``FWLAB_FUZZ_SCALE=10 pytest tests/unit/test_fuzz_inputs.py`` multiplies every
count (10: about 12,000 inputs, several minutes); the default (1) keeps ``tests/unit`` fast.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import shutil
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from goldens import GOLDEN
from fwlab.cli import main

SCALE = max(0.01, float(os.environ.get("FWLAB_FUZZ_SCALE", "1")))


def _n(base: int) -> int:
    return max(1, round(base * SCALE))


SUITE_EXAMPLES = _n(400)
HOSTS_EXAMPLES = _n(150)
RECORD_EXAMPLES = _n(300)
CLI_EXAMPLES = _n(200)
RULESET_EXAMPLES = _n(200)
REPORT_EXAMPLES = int(os.environ.get("FWLAB_FUZZ_REPORT_EXAMPLES", str(_n(10))))
EXAMPLES = (SUITE_EXAMPLES + HOSTS_EXAMPLES + RECORD_EXAMPLES + CLI_EXAMPLES + RULESET_EXAMPLES
            + REPORT_EXAMPLES)


@pytest.fixture(autouse=True)
def _no_test_bed(monkeypatch):
    """The host stays untouched: building a test bed (namespaces, links) fails the test. (The
    machine's namespace list itself is shared with other runs, so it is not compared.)"""
    from fwlab.testbed.bed import Testbed

    def refuse(self, *a, **k):
        raise AssertionError("a fuzzed command started to build a test bed")

    monkeypatch.setattr(Testbed, "build", refuse)

def fuzz(n: int) -> settings:
    # no shrinking: the inputs are small already, and shrinking a command-line run takes minutes
    return settings(max_examples=n, deadline=None, derandomize=True, database=None,
                    phases=(Phase.explicit, Phase.generate),
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                       HealthCheck.data_too_large, HealthCheck.filter_too_much])



def cli(argv: list[str]) -> tuple[int, str, str]:
    """Run fwlab in-process; any exception other than SystemExit is a traceback, i.e. a failure."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(argv)
        except SystemExit as exc:  # argparse (--help, a bad option)
            rc = exc.code if isinstance(exc.code, int) else 2
    return rc, out.getvalue(), err.getvalue()


#: (test, exit status) -> count: shows the fuzzing reaches both accepted and refused inputs
OUTCOMES: Counter = Counter()


def check(argv: list[str], test: str = "") -> tuple[int, str, str]:
    rc, out, err = cli(argv)
    OUTCOMES[test, rc] += 1
    assert rc in (0, 2), (argv, rc, err)
    assert "Traceback" not in err, (argv, err)
    if rc == 2:
        lines = err.splitlines()
        assert len(lines) == 1, (argv, err)
        assert lines[0].startswith("fwlab: error: "), (argv, err)
    return rc, out, err


_SCRATCH: dict[str, Path] = {}


def _scratch(factory, name: str) -> Path:
    """One temporary directory per test, emptied for each example (cheaper than one per example)."""
    if name not in _SCRATCH:
        _SCRATCH[name] = factory.mktemp(name)
    d = _SCRATCH[name]
    for p in d.iterdir():
        shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
    return d


# -- values: the odd things a hand-written file holds ------------------------------------------------
odd_text = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["", " ", "../../etc", "a/b", "a\x00b", "x" * 300, "routed", "nftables", "tcp", "udp",
                     "engine", "linear", "set", "max", "iperf3", "-rf", "café", "\u2028", "a\rb", "\x1c"]),
)
odd_scalar = st.one_of(
    st.booleans(), st.integers(-3, 3), st.integers(-2**70, 2**70), st.sampled_from([0, 1, 64, 100, 65536]),
    st.floats(allow_nan=True, allow_infinity=True), odd_text,
)
odd_value = st.one_of(odd_scalar, st.lists(odd_scalar, max_size=3), st.dictionaries(odd_text, odd_scalar, max_size=2),
                      st.lists(st.lists(odd_scalar, max_size=2), max_size=2))


def toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)  # JSON string escapes are TOML basic-string escapes
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v if x is not None) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{json.dumps(k, ensure_ascii=False)} = {toml_value(x)}" for k, x in v.items() if x is not None) + "}"
    raise TypeError(type(v))


def toml_doc(top: dict, arrays: dict[str, list[dict]]) -> str:
    lines = [f"{json.dumps(k, ensure_ascii=False)} = {toml_value(v)}" for k, v in top.items() if v is not None]
    for name, items in arrays.items():
        for item in items:
            lines.append(f"[[{name}]]")
            lines += [f"{json.dumps(k, ensure_ascii=False)} = {toml_value(v)}" for k, v in item.items()
                      if v is not None]
    return "\n".join(lines) + "\n"


# -- suites ---------------------------------------------------------------------------------------------
SUITE_KEYS = ["name", "description", "study", "mode", "backends", "layouts", "rules", "stateful_shortcut",
              "ip_versions", "duration_s", "repetitions", "settle_s", "seed", "device_model", "offloads",
              "pinning", "hosts", "unknown_key"]
TRAFFIC_KEYS = ["kind", "tool", "label", "options", "only", "sizes", "streams", "rate_bps", "rate_pps", "nope"]
BACKGROUND_KEYS = ["kind", "rates_pps", "frame_size", "sources", "dst_port", "lead_s", "tail_s", "cpu", "label",
                   "only"]
BASE_SUITE = {"name": "fz", "backends": ["nftables"], "layouts": ["linear", "set"], "rules": [0, 100],
              "duration_s": 1, "repetitions": 1}
BASE_TRAFFIC = [{"kind": "tcp"}, {"kind": "engine", "sizes": [64], "rate_pps": 1000}]
GOOD = {
    "mode": st.sampled_from([["routed"], ["bridge"], ["direct"], "routed", ["routed", "direct"]]),
    "backends": st.sampled_from([["nftables"], ["iptables-nft"], ["xdp"], ["none"], ["nftables", "xdp"]]),
    "layouts": st.sampled_from([["linear"], ["set"], ["linear", "set"]]),
    "rules": st.lists(st.integers(0, 1000), min_size=1, max_size=3),
    "ip_versions": st.sampled_from([[4], [6], [4, 6]]),
    "stateful_shortcut": st.sampled_from([[False], [True], [False, True]]),
    "pinning": st.fixed_dictionaries({}, optional={"client_cpu": st.one_of(st.none(), st.integers(-1, 2)),
                                                   "dut_cpu": st.sampled_from([0, 1, 99])}),
}


@st.composite
def suites(draw) -> dict:
    top = dict(BASE_SUITE)
    odd = draw(st.integers(0, 2)) > 0  # a third of the suites get only valid changes
    keys = SUITE_KEYS if odd else sorted(GOOD)
    for k in draw(st.lists(st.sampled_from(keys), max_size=draw(st.sampled_from([0, 1, 2, 4])), unique=True)):
        choice = draw(st.integers(0, 3)) if odd else 1
        if choice == 0:
            top.pop(k, None)
        elif choice == 1 and k in GOOD:
            top[k] = draw(GOOD[k])
        else:
            top[k] = draw(odd_value)
    traffic = [dict(BASE_TRAFFIC[i]) for i in draw(st.lists(st.sampled_from(range(len(BASE_TRAFFIC))),
                                                           min_size=0 if odd else 1, max_size=2, unique=odd is False))]
    for item in traffic:
        for k in draw(st.lists(st.sampled_from(TRAFFIC_KEYS), max_size=2 if odd else 0, unique=True)):
            item[k] = draw(odd_value)
    background = []
    if odd and draw(st.integers(0, 4)) == 0:
        bg = {"kind": draw(st.sampled_from(["udp_flood", "syn_flood", "x"]))}
        for k in draw(st.lists(st.sampled_from(BACKGROUND_KEYS), max_size=2, unique=True)):
            bg[k] = draw(odd_value)
        background.append(bg)
    arrays = {"traffic": traffic, "background": background}
    return {"text": toml_doc(top, arrays)}


@fuzz(SUITE_EXAMPLES)
@given(suite=suites(), garble=st.integers(0, 19), cut=st.integers(0, 400),
       overrides=st.lists(st.sampled_from([["--duration", "0"], ["--duration", "-1"], ["--duration", "nan"],
                                           ["--duration", "1e9"], ["--repetitions", "0"], ["--quick"],
                                           ["--repetitions", "2"], ["--duration", "0.5"], ["-q"]]), max_size=2))
def test_fuzz_suites(tmp_path_factory, suite, garble, cut, overrides):
    text = suite["text"]
    if garble == 0:
        text = text[:cut]  # cut anywhere: a torn or half-edited file
    elif garble == 1:
        text = text.replace("=", "", 1)
    f = _scratch(tmp_path_factory, "suite") / "s.toml"
    f.write_text(text, encoding="utf-8", errors="surrogatepass")
    rc, out, err = check(["run", str(f), "--dry-run", *[a for o in overrides for a in o]], "suites")
    if rc == 0:
        assert "trials to run" in out


# -- hosts files ----------------------------------------------------------------------------------------
HOST_KEYS = ["ssh", "port", "key", "known_hosts", "host_key_checking", "ssh_config", "ssh_options",
             "connect_timeout_s", "ns", "ifaces", "addresses", "bogus"]


@st.composite
def hosts_files(draw) -> str:
    lines = []
    for role in draw(st.lists(st.sampled_from(["client", "server", "dut", "attacker", "moon", "a b"]),
                              max_size=3, unique=True)):
        lines.append(f"[hosts.{json.dumps(role)}]")
        entry = {"ssh": draw(st.sampled_from(["root@h1", "h2", "-oProxyCommand=x", "a b", None]))}
        if entry["ssh"] is not None and draw(st.integers(0, 2)):  # a valid remote entry, then maybe odd keys
            entry["ifaces"] = ["eth1", "eth2"] if role == "dut" else ["eth1"]
        for k in draw(st.lists(st.sampled_from(HOST_KEYS), max_size=draw(st.sampled_from([0, 0, 1, 3])),
                               unique=True)):
            entry[k] = draw(odd_value)
        lines += [f"{json.dumps(k)} = {toml_value(v)}" for k, v in entry.items() if v is not None]
    if not draw(st.integers(0, 4)):
        lines.append(f"top = {toml_value(draw(odd_value))}")
    return "\n".join(lines) + "\n"


@fuzz(HOSTS_EXAMPLES)
@given(text=hosts_files(), raw=st.one_of(st.none(), st.binary(max_size=40)))
def test_fuzz_hosts_files(tmp_path_factory, text, raw):
    f = _scratch(tmp_path_factory, "hosts") / "hosts.toml"
    if raw is not None:
        f.write_bytes(raw)
    else:
        f.write_text(text, encoding="utf-8")
    check(["run", "quick", "--dry-run", "--hosts", str(f)], "hosts")


# -- records --------------------------------------------------------------------------------------------
RUN_KEYS = ["record_version", "suite", "plan", "host", "status", "started_utc", "ended_utc", "beds"]
TRIAL_KEYS = ["trial_id", "kind", "suite", "mode", "backend", "layout", "rules", "stateful_shortcut",
              "ip_version", "traffic", "tool", "size_bytes", "streams", "rate_bps", "duration_s", "repetition",
              "metrics", "series", "flags", "error", "conditions"]
SUITE_PARSED_KEYS = ["name", "rules", "backends", "repetitions", "duration_s", "traffic"]
GOLDEN_RUN = json.loads((GOLDEN / "run-tiny" / "run.json").read_text())
GOLDEN_TRIALS = (GOLDEN / "run-tiny" / "trials.jsonl").read_text().splitlines()


@st.composite
def records(draw) -> tuple[bytes, bytes]:
    run = json.loads(json.dumps(GOLDEN_RUN))
    trials = [json.loads(t) for t in GOLDEN_TRIALS]
    what = draw(st.integers(0, 9))
    if what == 0:
        run_bytes = draw(st.one_of(st.binary(max_size=60),
                                   odd_value.map(lambda v: json.dumps(v).encode())))
        return run_bytes, "\n".join(GOLDEN_TRIALS).encode() + b"\n"
    if what in (1, 2):
        for k in draw(st.lists(st.sampled_from(RUN_KEYS), min_size=1, max_size=2, unique=True)):
            if draw(st.booleans()):
                run.pop(k, None)
            else:
                run[k] = draw(odd_value)
    if what == 3:
        k = draw(st.sampled_from(SUITE_PARSED_KEYS))
        run["suite"]["parsed"][k] = draw(odd_value)
    tail = b""
    if what in (4, 5, 6, 7):
        i = draw(st.integers(0, len(trials) - 1))
        for k in draw(st.lists(st.sampled_from(TRIAL_KEYS), min_size=1, max_size=2, unique=True)):
            if draw(st.booleans()):
                trials[i].pop(k, None)
            elif k == "metrics" and draw(st.booleans()) and isinstance(trials[i].get("metrics"), dict):
                trials[i]["metrics"][draw(st.sampled_from(["throughput_bps", "rx_pps", "x"]))] = draw(odd_value)
            else:
                trials[i][k] = draw(odd_value)
    lines = [json.dumps(t).encode() for t in trials]
    if what == 8:
        i = draw(st.integers(0, len(lines) - 1))
        lines[i] = draw(st.one_of(st.binary(max_size=30), odd_value.map(lambda v: json.dumps(v).encode())))
    if what == 9:
        tail = draw(st.binary(max_size=30))  # a torn or garbled last line
    return json.dumps(run).encode(), b"\n".join(lines) + b"\n" + tail


def _write_record(root: Path, rec: tuple[bytes, bytes]) -> Path:
    d = root / "run"
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir()
    (d / "run.json").write_bytes(rec[0])
    (d / "trials.jsonl").write_bytes(rec[1])
    return d


def _primary(d: Path) -> dict[str, bytes]:
    return {n: (d / n).read_bytes() for n in ("run.json", "trials.jsonl")}


@fuzz(RECORD_EXAMPLES)
@given(rec=records(), fmt=st.sampled_from(["csv", "json", "series"]),
       onto=st.sampled_from([None, None, "run.json", "trials.jsonl"]))
def test_fuzz_records(tmp_path_factory, rec, fmt, onto):
    d = _write_record(_scratch(tmp_path_factory, "rec"), rec)
    before = {p.name: p.read_bytes() for p in d.iterdir()}
    check(["run", "--resume", str(d), "--dry-run"], "records")
    assert {p.name: p.read_bytes() for p in d.iterdir()} == before  # a dry run changes nothing
    out = d / onto if onto else d.parent / f"out.{fmt}"
    rc, _, _ = check(["export", str(d), "--format", fmt, "--out", str(out)], "export")
    assert _primary(d) == {n: before[n] for n in ("run.json", "trials.jsonl")}  # the record is never written
    if onto:
        assert rc == 2
    elif rc == 0 and fmt == "json":
        json.loads(out.read_text(), parse_constant=lambda c: pytest.fail(f"export wrote {c}"))


@fuzz(REPORT_EXAMPLES)
@given(rec=records())
def test_fuzz_report(tmp_path_factory, rec):
    """The full report on damaged records (slow when the record is sound, so fewer examples)."""
    d = _write_record(_scratch(tmp_path_factory, "rep"), rec)
    before = _primary(d)
    check(["report", str(d), "-q"], "report")
    assert _primary(d) == before


# -- imported rule sets ---------------------------------------------------------------------------------
ROOT = Path(__file__).resolve().parents[2]
IPT_LINES = (ROOT / "examples" / "firewalld-style.iptables").read_text().splitlines()
IPSET_TEXT = (ROOT / "examples" / "firewalld-style.ipset").read_text()
NFT_DOC = json.loads((Path(__file__).resolve().parent / "data" / "firewalld-style.nft.json").read_text())
RULE_WORDS = ["-A", "FORWARD", "-s", "-d", "-p", "tcp", "udp", "icmp", "--dport", "--sport", "-j", "ACCEPT",
              "DROP", "REJECT", "-i", "-o", "eth0", "eth1", "-m", "set", "--match-set", "blocked", "src",
              "conntrack", "--ctstate", "ESTABLISHED,RELATED", "198.18.1.0/24", "10.0.0.0/33", "::1/200",
              "0-65535", "70000", "-N", "X", "-g", "COMMIT", "*filter", ":FORWARD DROP [0:0]", "!", "-1", "", "\x00"]


@st.composite
def iptables_texts(draw) -> str:
    lines = list(IPT_LINES)
    for _ in range(draw(st.integers(1, 4))):
        how = draw(st.integers(0, 4))
        i = draw(st.integers(0, max(0, len(lines) - 1)))
        if how == 0 and lines:
            del lines[i]
        elif how == 1:
            lines.insert(i, " ".join(draw(st.lists(st.sampled_from(RULE_WORDS), min_size=1, max_size=10))))
        elif how == 2 and lines:
            words = lines[i].split()
            if words:
                words[draw(st.integers(0, len(words) - 1))] = draw(st.one_of(st.sampled_from(RULE_WORDS), odd_text))
            lines[i] = " ".join(words)
        elif how == 3:
            lines.insert(i, draw(odd_text))
        else:
            lines = lines[: draw(st.integers(0, len(lines)))]
    return "\n".join(lines) + "\n"


def _mutate_json(draw, doc):
    """`doc` with one value somewhere replaced by an odd value (or removed)."""
    doc = json.loads(json.dumps(doc))
    node, path = doc, []
    for _ in range(draw(st.integers(1, 6))):
        if isinstance(node, dict) and node:
            k = draw(st.sampled_from(sorted(node)))
        elif isinstance(node, list) and node:
            k = draw(st.integers(0, len(node) - 1))
        else:
            break
        path.append((node, k))
        node = node[k]
    if not path:
        return draw(odd_value)
    parent, k = path[-1]
    if draw(st.booleans()) and isinstance(parent, dict):
        del parent[k]
    else:
        parent[k] = draw(odd_value)
    return doc


@fuzz(RULESET_EXAMPLES)
@given(data=st.data(), which=st.sampled_from(["iptables", "iptables", "nft"]))
def test_fuzz_rule_set_import(data, which):
    """A mutated rule set goes through detection, the shape check, the parser and the class
    derivation (what `fwlab run --ruleset` does before any bed is built): it is accepted, or a
    FwlabError names the problem; no other exception."""
    from fwlab.dut.imported import ImportedFirewall
    from fwlab.errors import FwlabError
    from fwlab.rules.derive import BedAddresses, derive
    from fwlab.rules.iptables_save import parse_iptables_save
    from fwlab.rules.nft_json import parse_nft_json

    bed = BedAddresses("eth0", "eth1", {4: "198.18.1.1", 6: "2001:2:0:1::1"}, {4: "198.19.1.1", 6: "2001:2:0:2::1"},
                       {4: "198.18.1.0/24", 6: "2001:2:0:1::/64"}, {4: "198.19.1.0/24", 6: "2001:2:0:2::/64"},
                       ("198.18.1.254", "198.19.1.254", "2001:2:0:1::fe", "2001:2:0:2::fe"))
    ok = True
    try:
        if which == "iptables":
            text = data.draw(iptables_texts())
            ipset = IPSET_TEXT if data.draw(st.booleans()) else None
            fw = ImportedFirewall.from_text(text, "fuzz.iptables", ipset)
            if fw.kind == "iptables":
                derive(parse_iptables_save(text, fw.ip_version, ipset), bed)
        else:
            doc = _mutate_json(data.draw, NFT_DOC)
            derive(parse_nft_json(json.dumps(doc)), bed)
    except FwlabError as exc:
        ok = False
        assert "\n" not in exc.one_line()
    OUTCOMES["ruleset", 0 if ok else 2] += 1


# -- command lines --------------------------------------------------------------------------------------
@st.composite
def argvs(draw) -> list[str]:
    word = st.one_of(odd_text.filter(lambda s: "\x00" not in s),
                     st.sampled_from(["quick", "0", "-1", "1e400", "nan", "99999999999999999999", "--", "-h"]))
    cmd = draw(st.sampled_from(["run", "report", "rules", "export", "list", "compare", "bogus", None]))
    opts = {
        "run": ["--dry-run", "--repetitions", "--duration", "--quick", "--resume", "--hosts", "-q"],
        "rules": ["--backend", "--count", "--layout", "--mode", "--ip-version", "--stateful-shortcut", "--seed"],
        "export": ["--format", "--out"],
        "report": ["-q"], "compare": ["--metric", "--ignore", "--json", "--noise"],
    }.get(cmd or "", ["--version", "--help"])
    argv = [cmd] if cmd else []
    for _ in range(draw(st.integers(0, 4))):
        argv.append(draw(st.one_of(st.sampled_from(opts), word)))
    if cmd == "run" and "--dry-run" not in argv:
        argv.append("--dry-run")  # never a real run
    if cmd == "rules":  # bound the rule count: a large one is valid but slow to render
        argv = [a if not (a.isdigit() and len(a) > 4) else "5000" for a in argv]
    if cmd == "export" and "--out" not in argv:
        argv += ["--out", "OUT"]
    return argv


@fuzz(CLI_EXAMPLES)
@given(argv=argvs())
def test_fuzz_command_lines(tmp_path_factory, argv):
    d = _scratch(tmp_path_factory, "cli")
    argv = [str(d / "out") if a == "OUT" else a for a in argv]
    cwd = os.getcwd()
    os.chdir(d)  # relative paths a fuzzed argv names land here
    try:
        check(argv, "cli")
    finally:
        os.chdir(cwd)


def test_enough_inputs_both_ways():
    """>= 1000 inputs (default run), and each fuzzed kind of input was both accepted and refused at least once
    (a generator whose every input fails at the first check would test nothing)."""
    assert EXAMPLES >= 1000 or SCALE < 1
    if not OUTCOMES:
        pytest.skip("run with the fuzz tests above")
    print(f"fuzz inputs: {sum(OUTCOMES.values())} command runs / checks over {EXAMPLES} generated inputs "
          f"(scale {SCALE:g}); outcomes {dict(sorted(OUTCOMES.items()))}")
    for test in ("suites", "hosts", "records", "export", "cli", "ruleset"):
        if any(t == test for t, _ in OUTCOMES):
            assert OUTCOMES[test, 0] and OUTCOMES[test, 2], (test, dict(OUTCOMES))


@pytest.fixture(scope="module", autouse=True)
def _golden_unchanged():
    """The golden record is read, never written."""
    before = {p.name: p.read_bytes() for p in (GOLDEN / "run-tiny").iterdir()}
    yield
    assert {p.name: p.read_bytes() for p in (GOLDEN / "run-tiny").iterdir()} == before
    for extra in set(p.name for p in (GOLDEN / "run-tiny").iterdir()) - set(before):
        shutil.rmtree(GOLDEN / "run-tiny" / extra, ignore_errors=True)
