"""The `command` backends: any firewall described by a small TOML file and a Jinja2 template.

Owns: reading and validating firewall description files, rendering the generator's rule set with
their template, and running their commands (apply, flush, list, counters, version) through the
host interface in the DUT namespace (or on a remote DUT host). Whether a firewall can run is
decided by the DUT host's ``uname -s`` (``platforms``), not by the machine fwlab runs on. Each description is registered as backend
``command:<name>``: the ones shipped in ``dut/commands/`` (nftables — a self-test against the
native backend —, iptables, pf, ipfw) and any ``*.toml`` in the directories listed in
``$FWLAB_FIREWALLS`` (colon-separated), so a suite names them like any other backend
(``backends = ["command:nftables"]``). Never knows any firewall's syntax itself.

A description file::

    name = "nftables"                    # backend "command:nftables"
    summary = "..."                      # shown by `fwlab list`
    template = "nftables.nft.j2"         # next to this file; renders the rule set
    layouts = ["linear", "set"]          # generator layouts the template handles
    modes = ["routed", "bridge"]         # test-bed modes it can run in
    stateful = true                      # handles the 'established,related accept' shortcut
    platforms = ["linux"]                # `uname -s` of the DUT host it runs on (others: plan skip)
    tools = ["nft"]                      # programs it needs (checked before a run)
    bridge_nf_call = "{{ ... }}"         # optional: br_netfilter in bridge mode (bool or template)
    [commands]                           # argv lists, or lists of argv lists run in order;
    apply = ["nft", "-f", "{{ file }}"]  # every argument is a template (same variables as the
    flush = ["nft", "flush", "ruleset"]  # rule set, where known); the rule set goes to apply's
    list = ["nft", "-s", "list", "ruleset"]  # stdin unless an argument uses {{ file }}
    counters = ["nft", "list", "ruleset"]
    version = ["nft", "--version"]       # run in the DUT namespace too (a remote DUT: on its host)
    [counters]
    pattern = 'packets (?P<packets>\\d+) .*comment "(?P<tag>[^"]+)"'   # per line of counters
    # packets_pattern = '...(?P<packets>\\d+)'  # when the packets are on a line after the
    #                                         # rule's ('pattern' then names only the tag)
    [listing]
    strip = ['^#.*$']                    # regexes removed from list's output before the digest

Template variables: ``ip_version``, ``layout``, ``count``, ``client_net``, ``server_net``,
``stateful_shortcut``, ``seed``, ``mode``, ``host_plen`` (32 or 128) and ``entries`` — each with
``index``, ``tag`` ("deny-<index>"), ``src``, ``proto``, ``dport``. Every rule the template
writes should carry its tag (deny-i, permit-fwd, permit-rev, default, infra-...) where the
counters command shows it, so counters can be summed per class.
"""

from __future__ import annotations

import os
import re
from functools import cached_property
from pathlib import Path
from typing import Union

import jinja2
from jinja2.exceptions import SecurityError
from jinja2.sandbox import SandboxedEnvironment
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from fwlab.dut.base import BACKENDS, Backend, DutContext, register, sum_by_class
from fwlab.errors import BackendError
from fwlab.rules.model import LAYOUTS, RuleSet
from fwlab.testbed.host import LocalHost
from fwlab.files import kind, loads_toml
from fwlab.validation import one_line, read_text

SHIPPED_DIR = Path(__file__).resolve().parent / "commands"
PREFIX = "command:"

Argv = list[str]
Commands = Union[Argv, list[Argv]]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class CommandsModel(_Strict):
    apply: Commands
    flush: Commands
    list: Commands
    counters: Commands
    version: Commands

    @field_validator("*")
    @classmethod
    def _argvs(cls, v):
        if not v:
            raise ValueError("needs a command")
        return [v] if isinstance(v[0], str) else v


def _regex(v: str, groups: set[str]) -> str:
    try:
        rx = re.compile(v)
    except re.error as exc:
        raise ValueError(f"not a regular expression: {exc}") from None
    if not groups <= set(rx.groupindex):
        raise ValueError("needs the named groups " + " and ".join(f"(?P<{g}>...)" for g in sorted(groups)))
    return v


class CountersModel(_Strict):
    pattern: str = Field(description="regex applied to every line of the counters command's output; "
                                     "named groups 'tag' and 'packets' (only 'tag' with packets_pattern)")
    packets_pattern: str | None = Field(default=None, description="for tools that print a rule's counters "
                                        "on the lines after it: regex with the named group 'packets', "
                                        "applied to the lines following a 'pattern' match")

    @model_validator(mode="after")
    def _groups(self) -> "CountersModel":
        if self.packets_pattern is None:
            _regex(self.pattern, {"tag", "packets"})
        else:
            _regex(self.pattern, {"tag"})
            _regex(self.packets_pattern, {"packets"})
        return self


class ListingModel(_Strict):
    strip: list[str] = Field(default_factory=list, description="regexes removed (per line, multiline) "
                                                               "from the listing before the digest")


class FirewallFile(_Strict):
    """A firewall description (one TOML file)."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_.-]{0,31}$")
    summary: str = ""
    template: str
    layouts: list[str] = Field(default_factory=lambda: ["linear"])
    modes: list[str] = Field(default_factory=lambda: ["routed", "bridge"])
    stateful: bool = False
    platforms: list[str] = Field(default_factory=lambda: ["linux"])
    tools: list[str] = Field(default_factory=list)
    bridge_nf_call: bool | str = True
    commands: CommandsModel
    counters: CountersModel
    listing: ListingModel = Field(default_factory=ListingModel)

    @field_validator("layouts")
    @classmethod
    def _layouts(cls, v: list[str]) -> list[str]:
        bad = [x for x in v if x not in LAYOUTS]
        if bad or not v:
            raise ValueError(f"layouts must be some of {', '.join(LAYOUTS)} (got {v})")
        return v

    @field_validator("modes")
    @classmethod
    def _modes(cls, v: list[str]) -> list[str]:
        bad = [x for x in v if x not in ("routed", "bridge")]
        if bad or not v:
            raise ValueError(f"modes must be some of routed, bridge (got {v})")
        return v


def _env(base: Path) -> jinja2.Environment:
    """Templates render in jinja2's sandbox: a template reaches the variables it is given, never
    Python's internals (``{{ cycler.__init__.__globals__.os }}`` is a SecurityError, reported as a
    BackendError naming the template), and loads only files beside its description."""
    return SandboxedEnvironment(loader=jinja2.FileSystemLoader(str(base)), undefined=jinja2.StrictUndefined,
                                trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
                                autoescape=False)


def read_firewall(path: Path) -> FirewallFile:
    """Parse and validate one description; BackendError naming the file and the problem."""
    data = loads_toml(read_text(path, "firewall description", BackendError, fix="give a TOML text file"),
                      f"firewall description {path}", BackendError, fix="fix the TOML syntax")
    try:
        fw = FirewallFile.model_validate(data)
    except ValidationError as exc:
        raise BackendError(f"firewall description {path}: {one_line(exc)}",
                           fix="see the format in fwlab/dut/command.py's docstring") from None
    tpl = path.parent / fw.template
    if Path(fw.template).is_absolute() or ".." in Path(fw.template).parts or kind(tpl) != "file":
        raise BackendError(f"firewall description {path}: template {fw.template} does not exist",
                           fix="put the template next to the description or fix 'template'")
    try:
        _env(path.parent).parse(read_text(tpl, "firewall template", BackendError, fix="give a Jinja2 text file"))
    except jinja2.TemplateSyntaxError as exc:
        raise BackendError(f"firewall template {tpl}:{exc.lineno}: {exc.message}", fix="fix the template") from None
    except RecursionError:
        raise BackendError(f"firewall template {tpl} nests too deeply", fix="flatten the template") from None
    return fw


def template_vars(rs: RuleSet, mode: str) -> dict:
    return {"ip_version": rs.ip_version, "layout": rs.layout, "count": rs.count,
            "client_net": rs.client_net, "server_net": rs.server_net,
            "stateful_shortcut": rs.stateful_shortcut, "seed": rs.seed, "mode": mode,
            "host_plen": 32 if rs.ip_version == 4 else 128,
            "entries": [{"index": i, "tag": f"deny-{i}", "src": e.src, "proto": e.proto, "dport": e.dport}
                        for i, e in enumerate(rs.entries)]}


def _truthy(text: str) -> bool:
    t = text.strip().lower()
    if t in ("true", "1", "yes", "on"):
        return True
    if t in ("false", "0", "no", "off", ""):
        return False
    raise BackendError(f"bridge_nf_call rendered to '{text}', not a boolean", fix="make it render true or false")


class CommandBackend(Backend):
    """A firewall driven by the commands of a description file."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.fw = read_firewall(self.path)
        self.name = PREFIX + self.fw.name
        self.layouts = tuple(self.fw.layouts)
        self.summary = self.fw.summary or f"commands from {self.path.name}"
        self._env = _env(self.path.parent)

    @property
    def platforms(self) -> tuple[str, ...]:  # type: ignore[override]
        return tuple(p.lower() for p in self.fw.platforms)

    @property
    def tools(self) -> tuple[str, ...]:  # type: ignore[override]
        # checked on the DUT host, and only for a backend the plan keeps (see fwlab.run.preflight)
        return tuple(self.fw.tools)

    @cached_property
    def _pattern(self) -> re.Pattern:
        return re.compile(self.fw.counters.pattern)

    @cached_property
    def _packets_pattern(self) -> re.Pattern | None:
        p = self.fw.counters.packets_pattern
        return re.compile(p) if p else None

    def unsupported(self, layout: str, mode: str, stateful_shortcut: bool,
                    system: str | None = None) -> str | None:
        why = super().unsupported(layout, mode, stateful_shortcut, system)
        if why:
            return why
        if mode not in self.fw.modes:
            return f"{self.name} runs in {', '.join(self.fw.modes)} mode, not {mode}"
        if stateful_shortcut and not self.fw.stateful:
            return f"{self.name} has no 'established,related accept' shortcut (stateful = false in {self.path.name})"
        return None

    def bridge_nf_call(self, mode: str, rs: RuleSet) -> bool | None:
        if mode != "bridge":
            return None
        v = self.fw.bridge_nf_call
        if isinstance(v, bool):
            return v
        return _truthy(self._env.from_string(v).render(**template_vars(rs, mode)))

    def render(self, rs: RuleSet, mode: str) -> str:
        try:
            return self._env.get_template(self.fw.template).render(**template_vars(rs, mode))
        except SecurityError as exc:
            raise BackendError(f"{self.name}: template {self.fw.template} reaches outside its variables "
                               f"({str(exc)[:120]}); templates render in a sandbox",
                               fix=f"use only the template variables (fwlab/dut/command.py) in {self.path}") from None
        except jinja2.TemplateError as exc:
            raise BackendError(f"{self.name}: rendering {self.fw.template} failed: {exc}",
                               fix="fix the template") from None

    def _argvs(self, which: str, variables: dict) -> list[list[str]]:
        out = []
        for argv in getattr(self.fw.commands, which):
            try:
                out.append([self._env.from_string(a).render(**variables) for a in argv])
            except jinja2.TemplateError as exc:
                raise BackendError(f"{self.name}: the {which} command '{' '.join(argv)}': {exc}",
                                   fix=f"fix [commands] {which} in {self.path}") from None
        return out

    def _run(self, ctx: DutContext, which: str, variables: dict | None = None) -> str:
        out = []
        for argv in self._argvs(which, variables or {"mode": ctx.mode}):
            out.append(ctx.host.run(argv, ns=ctx.ns).stdout)
        return "".join(out)

    def _apply(self, ctx: DutContext, text: str, rs: RuleSet) -> None:
        variables = {**template_vars(rs, ctx.mode), "entries": None}
        uses_file = any("file" in a for argv in self.fw.commands.apply for a in argv)
        if not uses_file:
            for argv in self._argvs("apply", variables):
                ctx.host.run(argv, ns=ctx.ns, input=text)
            return
        # the file lives on the DUT host (a remote DUT reads its own file system); the host
        # removes its scratch directory when it is closed
        path = ctx.host.put_file(text, f"fwlab-rules-{self.fw.name}.conf", mode=0o600)
        for argv in self._argvs("apply", {**variables, "file": path}):
            ctx.host.run(argv, ns=ctx.ns)

    def listing(self, ctx: DutContext) -> str:
        text = self._run(ctx, "list")
        for rx in self.fw.listing.strip:
            text = re.sub(rx, "", text, flags=re.M)
        return "\n".join(line for line in text.splitlines() if line.strip()) + "\n"

    def parse_counters(self, text: str) -> dict[str, int]:
        """Packets per rule tag in the counters command's output: a line matching ``pattern``
        gives both, or (with ``packets_pattern``) names the tag whose packets are on the first
        following line that matches ``packets_pattern`` (``pfctl -vvsr``)."""
        out: dict[str, int] = {}
        pending: str | None = None
        for line in text.splitlines():
            m = self._pattern.search(line)
            if m:
                if self._packets_pattern is None:
                    out[m.group("tag")] = out.get(m.group("tag"), 0) + int(m.group("packets"))
                else:
                    pending = m.group("tag")
                continue
            if pending is not None and self._packets_pattern is not None:
                p = self._packets_pattern.search(line)
                if p:
                    out[pending] = out.get(pending, 0) + int(p.group("packets"))
                    pending = None
        return out

    def rule_counters(self, ctx: DutContext) -> dict[str, int]:
        """Packets per rule tag, as the counters command shows them."""
        return self.parse_counters(self._run(ctx, "counters"))

    def counters(self, ctx: DutContext) -> dict[str, int]:
        return sum_by_class(self.rule_counters(ctx).items())

    def flush(self, ctx: DutContext) -> None:
        self._run(ctx, "flush")

    def version(self, host: LocalHost, ns: str | None = None) -> str:
        out = [host.run(argv, ns=ns, check=False).stdout.strip() for argv in self._argvs("version", {})]
        return f"{'; '.join(o for o in out if o) or 'unknown'} (via {self.path.name})"

    def version_at(self, host: LocalHost, ns: str | None) -> str:
        """The version command runs where every other command of the description runs: in the
        DUT's namespace ``ns`` (a plug-in never runs in the host's own namespace)."""
        return self.version(host, ns=ns)


def register_file(path: Path) -> CommandBackend:
    """Register the firewall described by ``path`` as backend command:<name>."""
    be = CommandBackend(path)
    if be.name in BACKENDS and getattr(BACKENDS.get(be.name), "path", None) == be.path:
        return BACKENDS.get(be.name)  # the same file again
    return register(be)


class BrokenCommand(Backend):
    """A user's description file that does not validate: listed as invalid, and any run that
    names it stops before it starts with the file's error (imports never fail because of it)."""

    def __init__(self, path: Path, error: BackendError) -> None:
        self.path, self.error = path, error
        self.name = PREFIX + path.stem
        self.summary = f"INVALID: {error.one_line()}"

    @property
    def tools(self) -> tuple[str, ...]:  # type: ignore[override]
        raise self.error  # preflight: the run stops with the file's one-line error

    def unsupported_here(self, system: str | None = None) -> str | None:
        return self.error.one_line()

    def unsupported(self, layout, mode, stateful_shortcut, system=None):
        raise self.error  # a plan or `fwlab rules` naming it stops with the file's one-line error

    def render(self, rs: RuleSet, mode: str) -> str:
        raise self.error

    def _apply(self, ctx, text, rs):
        raise self.error

    def listing(self, ctx):
        raise self.error

    def counters(self, ctx):
        raise self.error

    def flush(self, ctx):
        raise self.error

    def version(self, host, ns=None):
        return "invalid description"


def register_all() -> None:
    for path in sorted(SHIPPED_DIR.glob("*.toml")):
        register_file(path)
    for d in filter(None, os.environ.get("FWLAB_FIREWALLS", "").split(":")):
        p = Path(d)
        try:
            paths = sorted(p.glob("*.toml")) if kind(p) == "dir" else [p]
        except OSError as exc:  # an unreadable directory: named when a run asks for its backends
            paths, listing_error = [], exc
        else:
            listing_error = None
        if listing_error is not None:
            err = BackendError(f"FWLAB_FIREWALLS directory {p} cannot be listed: {listing_error.strerror}",
                               fix="fix FWLAB_FIREWALLS or the directory's permissions")
            if PREFIX + p.name not in BACKENDS:
                register(BrokenCommand(p, err))
        for path in paths:
            try:
                register_file(path)
            except Exception as exc:  # noqa: BLE001  a broken plug-in never breaks unrelated commands
                err = exc if isinstance(exc, BackendError) else BackendError(
                    f"firewall description {path}: {type(exc).__name__}: {str(exc)[:160]}",
                    fix="fix the description or remove it from FWLAB_FIREWALLS")
                if PREFIX + path.stem not in BACKENDS:
                    register(BrokenCommand(path, err))


register_all()
