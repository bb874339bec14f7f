"""Issue 34, classes 3 to 5, as a table of hand-written hostile inputs: every reader is bounded
(depth, size, regular files only), everything checkable is checked before the first packet (and
by --dry-run), flag conflicts are refused, and plug-ins stay inside the lab (sandboxed templates,
commands in the DUT's namespace). Each row runs the real entry point and must end with exit 2
and one line naming the problem and the fix; the inputs, the record and the host's namespaces
are unchanged afterwards, and no test bed is built."""

from __future__ import annotations

import json

import hashlib
import os
import shutil
import textwrap
from pathlib import Path

import pytest

from goldens import GOLDEN
from fwlab.cli import main
from fwlab.errors import BackendError

DEEP = "x = " + "[" * 5000 + "\n"
BASE = 'name = "t"\nbackends = ["nftables"]\nlayouts = ["linear"]\nrules = [0]\nduration_s = 1\nrepetitions = 1\n'
TCP = '[[traffic]]\nkind = "tcp"\n'


def rfc2544(goal: str, algorithm: str = "mlr") -> str:
    return (BASE.replace("duration_s = 1", "duration_s = 0.5") + 'device_model = "napi"\n[[traffic]]\n'
            f'kind = "throughput"\nsizes = [64]\n[traffic.options]\nalgorithm = "{algorithm}"\ngoal = {goal}\n')


#: (id, files to write {name: text or bytes, or "FIFO"}, argv (NAME = that file's path), needle in the error)
HOSTILE = [
    # -- readers bounded (class 3)
    ("deep-suite", {"s.toml": DEEP}, ["run", "s.toml", "--dry-run"], "more than 64 deep"),
    ("deep-hosts", {"h.toml": DEEP}, ["run", "quick", "--dry-run", "--hosts", "h.toml"], "more than 64 deep"),
    ("deep-mix", {"m.toml": DEEP, "r.nft": "table inet t {\n}\n"}, ["run", "--ruleset", "r.nft", "--mix", "m.toml"],
     "more than 64 deep"),
    ("deep-inline-table", {"s.toml": BASE + "x = " + "{a = " * 100 + "1" + "}" * 100 + "\n" + TCP},
     ["run", "s.toml", "--dry-run"], "more than 64 deep"),
    ("fifo-suite", {"s.toml": "FIFO"}, ["run", "s.toml", "--dry-run"], "is a FIFO"),
    ("fifo-hosts", {"h.toml": "FIFO"}, ["run", "quick", "--dry-run", "--hosts", "h.toml"], "is a FIFO"),
    ("fifo-ruleset", {"r.nft": "FIFO"}, ["run", "--ruleset", "r.nft"], "is a FIFO"),
    ("fifo-mix", {"m.toml": "FIFO", "r.nft": "table inet t {\n}\n"}, ["run", "--ruleset", "r.nft", "--mix", "m.toml"],
     "is a FIFO"),
    ("device-suite", {}, ["run", "/dev/zero", "--dry-run"], "is a device"),
    ("device-ruleset", {}, ["run", "--ruleset", "/dev/null"], "is a device"),
    ("directory-hosts", {}, ["run", "quick", "--dry-run", "--hosts", "/tmp"], "is a directory"),
    ("comment-only-ruleset", {"r.nft": "# nothing\n\n" * 1000}, ["run", "--ruleset", "r.nft"], "holds no rules"),
    ("empty-ruleset", {"r.nft": ""}, ["run", "--ruleset", "r.nft"], "holds no rules"),
    ("binary-suite", {"s.toml": b"\xff\xfe\x00name"}, ["run", "s.toml", "--dry-run"], "not UTF-8"),
    # -- checked before the first packet (class 4)
    ("unknown-study", {"s.toml": BASE + 'study = "seed-999"\n' + TCP}, ["run", "s.toml", "--dry-run"],
     "study 'seed-999' has no published data"),
    ("goal-negative", {"s.toml": rfc2544("{ duration_sum_s = -1 }")}, ["run", "s.toml", "--dry-run"],
     "duration_sum_s must be a number > 0"),
    ("goal-unknown-preset", {"s.toml": rfc2544('"nosuchpreset"')}, ["run", "s.toml", "--dry-run"],
     "unknown search goal preset"),
    ("goal-numbers", {"s.toml": rfc2544("[1, 2]")}, ["run", "s.toml", "--dry-run"], "not a search goal"),
    ("goal-binary-string", {"s.toml": rfc2544('"x"', "binary")}, ["run", "s.toml", "--dry-run"], "goal table"),
    ("goal-binary-negative", {"s.toml": rfc2544("{ trial_duration_s = -1 }", "binary")},
     ["run", "s.toml", "--dry-run"], "trial_duration_s must be > 0"),
    ("rate-huge", {"s.toml": BASE + '[[traffic]]\nkind = "udp"\nrate_bps = 9223372036854775807\n'},
     ["run", "s.toml", "--dry-run"], "rate_bps"),
    ("duration-nan", {"s.toml": BASE.replace("duration_s = 1", "duration_s = nan") + TCP},
     ["run", "s.toml", "--dry-run"], "duration_s: Input should be a finite number"),
    ("duration-inf-flag", {}, ["run", "quick", "--dry-run", "--duration", "inf"], "finite number"),
    ("settle-nan", {"s.toml": BASE + "settle_s = nan\n" + TCP}, ["run", "s.toml", "--dry-run"], "finite number"),
    ("mode-twice", {"s.toml": BASE + 'mode = ["routed", "routed"]\n' + TCP}, ["run", "s.toml", "--dry-run"],
     "mode lists 'routed' more than once"),
    ("ip-version-twice", {"s.toml": BASE.replace("rules = [0]", "rules = [0]\nip_versions = [4, 4]") + TCP},
     ["run", "s.toml", "--dry-run"], "ip_versions lists 4 more than once"),
    ("rules-twice", {"s.toml": BASE.replace("rules = [0]", "rules = [0, 10, 0]") + TCP},
     ["run", "s.toml", "--dry-run"], "rules lists 0 more than once"),
    ("sizes-twice", {"s.toml": BASE + '[[traffic]]\nkind = "udp"\nsizes = [64, 64]\n'},
     ["run", "s.toml", "--dry-run"], "sizes lists 64 more than once"),
    ("ruleset-with-hosts", {"r.nft": "table inet t {\n}\n", "h.toml": ""},
     ["run", "--ruleset", "r.nft", "--hosts", "h.toml"], "--hosts is not used"),
    ("interfaces-with-suite", {}, ["run", "quick", "--dry-run", "--interfaces", "eth0=client,eth1=server"],
     "--interfaces goes with --ruleset"),
    ("ipset-with-suite", {"i.txt": "create x hash:ip\n"}, ["run", "quick", "--dry-run", "--ipset", "i.txt"],
     "--ipset goes with --ruleset"),
    ("interfaces-lo", {"r.nft": "table inet t {\n}\n"},
     ["run", "--ruleset", "r.nft", "--interfaces", "lo=client,eth1=server"], "the loopback interface cannot be a side"),
    ("repair-without-resume", {}, ["run", "quick", "--dry-run", "--repair"], "--repair goes with --resume"),
    ("run-out-proc", {}, ["run", "quick", "--dry-run", "--out", "/proc/version/x"], "under /proc"),
]


@pytest.fixture(autouse=True)
def _no_test_bed(monkeypatch):
    """The host stays untouched: building a test bed (namespaces, links) fails the test."""
    from fwlab.testbed.bed import Testbed

    def refuse(self, *a, **k):
        raise AssertionError("a hostile input got as far as building a test bed")

    monkeypatch.setattr(Testbed, "build", refuse)


def snapshot(d: Path) -> dict[str, str]:
    out = {}
    for p in sorted(d.rglob("*")):
        if p.is_fifo():
            out[str(p)] = "fifo"
        elif p.is_file():
            out[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest()
        else:
            out[str(p)] = "dir"
    return out


@pytest.mark.parametrize("case", HOSTILE, ids=[c[0] for c in HOSTILE])
def test_hostile_input_is_one_clean_error(case, tmp_path, capsys, monkeypatch):
    _, files, argv, needle = case
    for name, text in files.items():
        p = tmp_path / name
        if text == "FIFO":
            os.mkfifo(p)
        elif isinstance(text, bytes):
            p.write_bytes(text)
        else:
            p.write_text(text)
    rec = tmp_path / "rec"
    shutil.copytree(GOLDEN / "run-tiny", rec)
    monkeypatch.chdir(tmp_path)
    before = snapshot(tmp_path)
    try:
        rc = main(argv)
    except SystemExit as exc:
        rc = exc.code
    out, err = capsys.readouterr()
    assert rc == 2, (rc, out, err)
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("fwlab: error: ") and "(fix: " in lines[0], err
    assert needle in lines[0], lines[0]
    assert snapshot(tmp_path) == before  # inputs, the record and the results directory unchanged


# -- plug-ins inside the lab (class 5) ---------------------------------------------------------------
DESCRIPTION = '''
name = "{name}"
template = "{name}.j2"
[commands]
apply = ["true"]
flush = ["true"]
list = ["true"]
counters = ["true"]
version = {version}
[counters]
pattern = '(?P<tag>\\S+) (?P<packets>\\d+)'
'''


def _drop(registry, name: str) -> None:
    if name in registry:
        del registry[name]


def adapter(d: Path, name: str, template: str, version: str = '["myfw", "-V"]') -> Path:
    (d / f"{name}.j2").write_text(template)
    p = d / f"{name}.toml"
    p.write_text(textwrap.dedent(DESCRIPTION.format(name=name, version=version)))
    return p


@pytest.mark.parametrize("template", [
    "{{ cycler.__init__.__globals__.os.system('touch PWNED') }}",
    "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "{{ self._TemplateReference__context }}",
    "{{ lipsum.__globals__['os'].system('touch PWNED') }}",
])
def test_a_template_cannot_reach_python(tmp_path, capsys, monkeypatch, template):
    from fwlab.dut.base import BACKENDS
    from fwlab.dut.command import register_all

    adapter(tmp_path, "evil", template)
    monkeypatch.setenv("FWLAB_FIREWALLS", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    register_all()
    try:
        rc = main(["rules", "--backend", "command:evil", "--count", "2"])
        out, err = capsys.readouterr()
        assert rc == 2 and len(err.splitlines()) == 1 and "fwlab: error: " in err, (rc, out, err)
        assert not (tmp_path / "PWNED").exists()
    finally:
        _drop(BACKENDS, "command:evil")


def test_a_sandboxed_template_still_renders_the_rule_set(tmp_path):
    from fwlab.dut.command import CommandBackend
    from fwlab.rules import generate

    be = CommandBackend(adapter(tmp_path, "ok", "{% for e in entries %}{{ e.tag }} {{ e.src }}\n{% endfor %}"))
    rs = generate(2, "linear", ip_version=4, client_net="198.18.1.0/24", server_net="198.19.1.0/24", seed=3)
    assert be.render(rs, "routed").splitlines()[0].startswith("deny-0 ")


class RecordingHost:
    """Stands in for the DUT's host: records where each command would run."""

    def __init__(self) -> None:
        self.calls: list[tuple[list[str], str | None]] = []

    def run(self, argv, ns=None, **kw):
        self.calls.append((argv, ns))

        class Done:
            stdout = "myfw 1.0\n"
        return Done()


def test_the_version_command_runs_in_the_duts_namespace(tmp_path):
    from fwlab.dut.command import CommandBackend

    be = CommandBackend(adapter(tmp_path, "ns", "x"))
    host = RecordingHost()
    assert be.version_at(host, "fwl-abc-dut").startswith("myfw 1.0")
    assert host.calls == [(["myfw", "-V"], "fwl-abc-dut")]


def test_the_bed_description_asks_for_the_version_in_the_dut_namespace():
    """The bed's description (fwlab.run.beds.describe) reads the backend's version through
    version_at with the DUT's namespace: a plug-in's version command never runs in the host's
    own namespace."""
    from fwlab.run.beds import describe

    class Timed:
        def timed(self, name):
            import contextlib
            return contextlib.nullcontext()

    class Bed:
        class topo:
            has_dut = True
        host = object()

        def host_for(self, role):
            return self.dut_host

        def ns(self, role):
            return f"fwl-x-{role}"

        def describe(self):
            return {}

    bed = Bed()
    bed.dut_host = RecordingHost()

    class Plugin:
        name = "command:ns"

        def version_at(self, host, ns):
            host.run(["v"], ns=ns)
            return "v1"

    assert describe(bed, None, Plugin(), Timed())["backend_version"] == "v1"
    assert bed.dut_host.calls == [(["v"], "fwl-x-dut")]


@pytest.mark.parametrize("content, needle", [(DEEP, "more than 64 deep"), ("FIFO", "is a FIFO"),
                                             (b"\xff\xff", "not UTF-8"), ("name = [", "not valid TOML")])
def test_a_broken_adapter_is_named_and_breaks_no_other_command(tmp_path, capsys, monkeypatch, content, needle):
    from fwlab.dut.base import BACKENDS
    from fwlab.dut.command import register_all

    p = tmp_path / "bad.toml"
    if content == "FIFO":
        os.mkfifo(p)
    elif isinstance(content, bytes):
        p.write_bytes(content)
    else:
        p.write_text(content)
    monkeypatch.setenv("FWLAB_FIREWALLS", str(tmp_path))
    register_all()
    try:
        assert main(["list"]) == 0  # unrelated commands work
        out, _ = capsys.readouterr()
        assert any("command:bad" in ln and "INVALID" in ln for ln in out.splitlines())  # cut to 100 columns
        assert main(["list", "--json"]) == 0  # the full text
        line = next(b["summary"] for b in json.loads(capsys.readouterr().out)["backends"] if b["name"] == "command:bad")
        assert "INVALID" in line and str(p) in line and needle in line
        assert main(["run", "quick", "--dry-run"]) == 0
        capsys.readouterr()
        rc = main(["rules", "--backend", "command:bad"])
        err = capsys.readouterr().err
        assert rc == 2 and len(err.splitlines()) == 1 and str(p) in err, err
        with pytest.raises(BackendError, match="bad.toml"):
            BACKENDS.get("command:bad").tools
    finally:
        _drop(BACKENDS, "command:bad")
