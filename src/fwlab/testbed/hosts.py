"""Where each role of the test bed lives: the hosts file and the connections it opens.

Owns: the ``[hosts.<role>]`` schema (in a suite or a separate file given with
``fwlab run --hosts FILE``), its validation into one-line errors, and :class:`Placement`, the
opened hosts of one run (one SSH connection per distinct target, shared by the roles on it).
Never touches: the namespaces (``testbed.bed``) or any remote host's configuration.

A role without an entry, or with an entry without ``ssh``, is local: the test bed creates its
namespace as usual. A remote role (``ssh = ...``) is a host the user has set up: fwlab creates no
namespace, link or address there; it runs commands there (in ``ns`` when given) and needs the
role's data interfaces (``ifaces``) to read counters. Its addresses are the standard plan's
unless ``addresses`` overrides them. A local role whose neighbour is remote must name the local
interface cabled to it (``ifaces``): fwlab moves it into the role's namespace for the bed and
gives it back afterwards. Extra generator hosts ``client2`` ... and server hosts ``server2`` ...
are remote only, each with its own address; pair k is client k -> server k (``testbed.pairs``).

Example::

    [hosts.dut]
    ssh = "root@198.51.100.7"      # [user@]host
    port = 22
    key = "/root/.ssh/fwlab_ed25519"
    known_hosts = "/root/.ssh/known_hosts"
    ifaces = ["enp1s0f0", "enp1s0f1"]  # client side, server side
    # ns = "fw"                    # run the DUT's commands in this namespace on that host

    [hosts.client]
    ifaces = ["enp3s0f0"]          # local NIC cabled to the DUT's client side
    [hosts.server]
    ifaces = ["enp3s0f1"]
"""

from __future__ import annotations

import ipaddress
import os
import re
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from fwlab.validation import one_line, read_toml

from fwlab.errors import HostError
from fwlab.testbed.clock import ClockOffset, measure_offset, sync_status
from fwlab.testbed.host import Host
from fwlab.testbed.ship import DEFAULT_CACHE_DIR
from fwlab.testbed.ssh import SshHost, SshTarget

#: roles a hosts file may place (a topology uses a subset)
KNOWN_ROLES = ("client", "dut", "server", "attacker")
#: more generator hosts: ``client2`` ... ``client16`` send part of each trial's traffic with
#: ``client`` (remote only; each with its own client4/client6 address on the client network)
EXTRA_CLIENT = re.compile(r"^client([2-9]|1[0-6])$")
#: more server hosts: ``server<k>`` receives what ``client<k>`` sends (pair k: client k -> server
#: k; pair 1 is client -> server); remote only, each with its own server4/server6 address on the
#: server network. iperf3 streams run every pair at once (runners.iperf3, testbed.pairs)
EXTRA_SERVER = re.compile(r"^server([2-9]|1[0-6])$")
#: how many data interfaces each role has: the DUT's client side first, then its server side
IFACE_COUNT = {"client": 1, "server": 1, "attacker": 1, "dut": 2}
#: a remote DUT cabled to a remote attacker host names a third interface: its attacker side
#: (background floods, fwlab.floods: the DUT's receive counter of the flood and, in routed mode,
#: the MAC the flood is sent to)
DUT_ATTACKER_IFACES = 3
#: the test bed's name of a hosts-file role where they differ (the attacker's bed role is ``atk``)
HOSTS_ROLE = {"atk": "attacker"}
#: address-plan fields a role may override, by role
PLAN_FIELDS = {
    "client": ("client4", "client6", "client_net4", "client_net6"),
    "server": ("server4", "server6", "server_net4", "server_net6"),
    "dut": ("dut_client_side4", "dut_server_side4", "dut_client_side6", "dut_server_side6"),
    "attacker": (),
}


def hosts_role(role: str) -> str:
    """The hosts-file name of a role the test bed may call otherwise (``atk``: ``attacker``)."""
    return HOSTS_ROLE.get(role, role)


def base_role(role: str) -> str:
    """``client3`` -> ``client``, ``server3`` -> ``server``; a known role stays itself."""
    return "client" if EXTRA_CLIENT.match(role) else "server" if EXTRA_SERVER.match(role) else role


def role_number(role: str) -> int:
    """The pair number of a client or server role: ``client``/``server`` 1, ``client3`` 3."""
    return int(role[6:] or 1)


def is_extra_host(role: str) -> bool:
    """An extra generator (``client2`` ...) or server host (``server2`` ...)."""
    return bool(EXTRA_CLIENT.match(role) or EXTRA_SERVER.match(role))
#: ssh options fwlab sets itself and a hosts file must not override
RESERVED_OPTIONS = ("controlpath", "controlmaster", "controlpersist", "batchmode")
#: entry keys that only mean something for a remote role
REMOTE_ONLY = ("port", "key", "known_hosts", "host_key_checking", "ssh_config", "ssh_options",
               "connect_timeout_s", "ns", "keep_engine", "cache_dir")

_DEST = re.compile(r"^(?:[A-Za-z0-9._][A-Za-z0-9._-]*@)?[A-Za-z0-9._:\[\]%-]+$")
_IFNAME = re.compile(r"^[A-Za-z0-9_.:@-]{1,15}$")


class HostEntry(BaseModel):
    """One role's placement. Without ``ssh`` the role is local."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)

    ssh: str | None = Field(None, description="[user@]host of the remote host; absent = local role")
    port: int = Field(22, ge=1, le=65535)
    key: str | None = Field(None, description="private key file (ssh -i, IdentitiesOnly)")
    known_hosts: str | None = Field(None, description="known_hosts file with the host's key")
    host_key_checking: Literal["yes", "accept-new"] = "yes"
    ssh_config: str | None = Field(None, description="ssh -F FILE, or \"none\" to ignore ~/.ssh/config")
    ssh_options: list[str] = Field(default_factory=list, description="extra ssh -o Key=Value options")
    connect_timeout_s: float = Field(10.0, gt=0, le=300)
    ns: str | None = Field(None, pattern=r"^[A-Za-z0-9_.-]{1,64}$",
                           description="network namespace on the remote host to run in")
    ifaces: list[str] = Field(default_factory=list, description="the role's data interfaces")
    addresses: dict[str, str] = Field(default_factory=dict, description="address-plan overrides")
    keep_engine: bool = Field(False, description="leave the shipped fwlab-engine in cache_dir after the run")
    cache_dir: str = Field(DEFAULT_CACHE_DIR, pattern=r"^/[A-Za-z0-9_./-]{1,200}$",
                           description="fwlab-owned directory on the host for shipped binaries")

    @field_validator("ssh")
    @classmethod
    def _ssh(cls, v: str | None) -> str | None:
        if v is not None and (v.startswith("-") or not _DEST.match(v)):
            raise ValueError(f"ssh = {v!r} is not [user@]host")
        return v

    @field_validator("ssh_options")
    @classmethod
    def _options(cls, v: list[str]) -> list[str]:
        for o in v:
            k, eq, _ = o.partition("=")
            if not eq or not k.strip() or " " in k.strip():
                raise ValueError(f"ssh option {o!r} is not Key=Value")
            if k.strip().lower() in RESERVED_OPTIONS:
                raise ValueError(f"ssh option {k.strip()} is set by fwlab and cannot be overridden")
        return v

    @field_validator("ifaces")
    @classmethod
    def _ifaces(cls, v: list[str]) -> list[str]:
        for i in v:
            if not _IFNAME.match(i):
                raise ValueError(f"interface name {i!r} is not a Linux interface name (1-15 chars)")
        return v

    @model_validator(mode="after")
    def _remote_only(self) -> "HostEntry":
        if self.ssh is None:
            given = [n for n in REMOTE_ONLY if n in self.model_fields_set]
            if given:
                raise ValueError(f"{', '.join(given)}: only for a remote role (set ssh = ...)")
        return self

    @property
    def remote(self) -> bool:
        return self.ssh is not None

    def target(self) -> SshTarget:
        assert self.ssh is not None
        return SshTarget(destination=self.ssh, port=self.port, key=self.key, known_hosts=self.known_hosts,
                         host_key_checking=self.host_key_checking, ssh_config=self.ssh_config,
                         options=tuple(self.ssh_options), connect_timeout_s=self.connect_timeout_s)


class HostsFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)

    hosts: dict[str, HostEntry]

    @model_validator(mode="after")
    def _roles(self) -> "HostsFile":
        for role, e in self.hosts.items():
            if role not in KNOWN_ROLES and not is_extra_host(role):
                raise ValueError(f"unknown role '{role}' (roles: {', '.join(KNOWN_ROLES)}; more "
                                 f"generator hosts: client2 ... client16; more server hosts: server2 ... server16)")
            if is_extra_host(role):
                _check_extra_host(self.hosts, role, e)
            want = IFACE_COUNT[base_role(role)]
            if role == "dut" and len(e.ifaces) == DUT_ATTACKER_IFACES:
                if not (e.remote and "attacker" in self.hosts and self.hosts["attacker"].remote):
                    raise ValueError("hosts.dut.ifaces has a third entry (the attacker side) but the DUT and the "
                                     "attacker are not both remote: name it only for a remote DUT cabled to a "
                                     "remote [hosts.attacker]")
            elif e.ifaces and len(e.ifaces) != want:
                raise ValueError(f"hosts.{role}.ifaces needs {want} interface(s)"
                                 + (" (client side, server side)" if role == "dut" else "")
                                 + f", got {len(e.ifaces)}"
                                 + (" (a third, the attacker side, only beside a remote [hosts.attacker])"
                                    if role == "dut" else ""))
            if e.remote and not e.ifaces:
                raise ValueError(f"remote role '{role}' needs ifaces = [...] (its data interface"
                                 f"{'s: client side, server side' if want == 2 else ''} on {e.ssh})")
            for k, v in e.addresses.items():
                allowed = (f"{base_role(role)}4", f"{base_role(role)}6") if is_extra_host(role) else PLAN_FIELDS[role]
                if k not in allowed:
                    raise ValueError(f"hosts.{role}.addresses.{k} is not one of "
                                     f"{', '.join(allowed) or 'nothing for this role'}")
                try:
                    (ipaddress.ip_network if "_net" in k else ipaddress.ip_address)(v)
                except ValueError:
                    raise ValueError(f"hosts.{role}.addresses.{k} = {v!r} is not an IP "
                                     f"{'network' if '_net' in k else 'address'}") from None
        _check_pairs(self.hosts)
        for role, e in self.hosts.items():
            for name, path in (("key", e.key), ("known_hosts", e.known_hosts),
                               ("ssh_config", None if e.ssh_config == "none" else e.ssh_config)):
                if path and not os.path.exists(os.path.expanduser(path)):
                    raise ValueError(f"hosts.{role}.{name} file {path} does not exist")
        return self


def _check_extra_host(hosts: dict[str, HostEntry], role: str, e: HostEntry) -> None:
    """An extra generator or server host: remote, beside a remote first host of its kind, with
    its own address (``client4`` / ``server4``)."""
    base = base_role(role)
    what = "generator" if base == "client" else "server"
    if not e.remote:
        raise ValueError(f"hosts.{role} is an extra {what} host and must be remote (ssh = ...)")
    if base not in hosts or not hosts[base].remote:
        raise ValueError(f"hosts.{role} needs a remote hosts.{base} too (the first {what} host)")
    if f"{base}4" not in e.addresses:
        raise ValueError(f"hosts.{role} needs addresses.{base}4 (its own address on the "
                         f"{base} network; {base}6 too for IPv6 trials)")


def _check_pairs(hosts: dict[str, HostEntry]) -> None:
    """With server hosts server2 ..., each client<k> streams to server<k>: both sides of every
    pair must be there (with one server, every generator host sends to it)."""
    servers = [r for r in hosts if EXTRA_SERVER.match(r)]
    if not servers:
        return
    for s in servers:
        c = f"client{role_number(s)}"
        if c not in hosts:
            raise ValueError(f"hosts.{s} has no hosts.{c}: with several server hosts client<k> streams to "
                             f"server<k> (add [hosts.{c}], the generator host of that pair, or remove hosts.{s})")
    for c in (r for r in hosts if EXTRA_CLIENT.match(r)):
        s = f"server{role_number(c)}"
        if s not in hosts:
            raise ValueError(f"hosts.{c} has no hosts.{s}: with several server hosts ({', '.join(sorted(servers))}) "
                             f"client<k> streams to server<k> (add [hosts.{s}] or remove hosts.{c})")


#: what a record's trials depend on in a role's entry: a hosts file given to ``--resume`` must
#: keep these for every role; how a host is reached (ssh, port, key, known_hosts, options,
#: cache_dir ...) may change
IDENTITY_FIELDS = ("remote", "ifaces", "addresses", "ns")


def _identity(entry: dict) -> dict:
    return {"remote": bool(entry.get("ssh")), "ifaces": list(entry.get("ifaces") or []),
            "addresses": dict(entry.get("addresses") or {}), "ns": entry.get("ns")}


def identity_difference(old: dict[str, dict], new: dict[str, dict]) -> str | None:
    """Where two sets of (dumped) entries differ in what a record's identity depends on (the
    roles, and per role remote or local, data interfaces, address overrides, namespace), as
    ``hosts.dut.ifaces (... in the run, ... in the file)``; None: they agree."""
    if set(old) != set(new):
        gone, added = sorted(set(old) - set(new)), sorted(set(new) - set(old))
        return ("the roles" + (f" (missing: {', '.join(gone)})" if gone else "")
                + (f" (not in the run: {', '.join(added)})" if added else ""))
    for role in sorted(old):
        a, b = _identity(old[role]), _identity(new[role])
        for f in IDENTITY_FIELDS:
            if a[f] != b[f]:
                return f"hosts.{role}.{f} ({a[f]!r} in the run, {b[f]!r} in the file)"
    return None


def changed_fields(old: dict[str, dict], new: dict[str, dict]) -> dict[str, list[str]]:
    """Per role, the entry keys whose values differ (connection details, after
    :func:`identity_difference` found none in the identity)."""
    out = {}
    defaults = {n: f.get_default(call_default_factory=True) for n, f in HostEntry.model_fields.items()}
    for role in sorted(set(old) & set(new)):
        a, b = {**defaults, **old[role]}, {**defaults, **new[role]}
        keys = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
        if keys:
            out[role] = keys
    return out


def command_overhead_s(host: Host, n: int = 7) -> float:
    """Median wall time of ``true`` on ``host`` [s] (session set-up, remote shell, wrapper)."""
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        host.run(["true"], timeout_s=30)
        times.append(time.perf_counter() - t0)
    return round(statistics.median(times), 6)


def parse_hosts(data: dict, origin: str) -> dict[str, HostEntry]:
    """Validate a ``{"hosts": {...}}`` table; raise HostError with a one-line reason."""
    try:
        return dict(HostsFile.model_validate(data).hosts)
    except ValidationError as exc:
        raise HostError(f"hosts file {origin} is invalid: {one_line(exc)}",
                        fix="correct the [hosts.<role>] tables (see docs/remote-hosts.md)") from None


def load_hosts(path: str | Path) -> tuple[dict[str, HostEntry], str]:
    """(entries, TOML text) of a hosts file."""
    p = Path(path)
    data, text = read_toml(p, "hosts file", HostError)
    return parse_hosts(data, f"'{p.name}'"), text


@dataclass
class Placement:
    """The hosts of one run: each remote role's connected host, plus the clock offsets measured
    when they were opened. Local roles have no entry in ``hosts``."""

    entries: dict[str, HostEntry]
    hosts: dict[str, Host] = field(default_factory=dict)
    clocks: dict[str, ClockOffset] = field(default_factory=dict)
    #: median wall time of one trivial command (``true``) per remote role [s]: what every remote
    #: command, rule loads included, costs on top of its own work
    overheads_s: dict[str, float] = field(default_factory=dict)
    #: each remote host's own report on its clock (chrony's tracking) where it gives one
    sync: dict[str, dict] = field(default_factory=dict)

    @property
    def remote_roles(self) -> tuple[str, ...]:
        return tuple(r for r, e in self.entries.items() if e.remote)

    def entry(self, role: str) -> HostEntry | None:
        """The entry of ``role`` (a hosts-file role, or the bed's name of one: ``atk``)."""
        return self.entries.get(hosts_role(role))

    def is_remote(self, role: str) -> bool:
        e = self.entry(role)
        return bool(e and e.remote)

    def host(self, role: str) -> Host:
        """The connected host of the remote ``role`` (bed names too: ``atk``)."""
        return self.hosts[hosts_role(role)]

    def plan_overrides(self) -> tuple[tuple[str, str], ...]:
        """Address-plan overrides of the bed's own roles (an extra client's or server's address is
        its own)."""
        return tuple(sorted((k, v) for r, e in self.entries.items() if not is_extra_host(r)
                            for k, v in e.addresses.items()))

    @property
    def generator_roles(self) -> tuple[str, ...]:
        """The client role and the extra generator hosts (client2 ...), in order."""
        extra = sorted((r for r in self.entries if EXTRA_CLIENT.match(r)), key=role_number)
        return ("client", *extra)

    @property
    def server_roles(self) -> tuple[str, ...]:
        """The server role and the extra server hosts (server2 ...), in order."""
        extra = sorted((r for r in self.entries if EXTRA_SERVER.match(r)), key=role_number)
        return ("server", *extra)

    def open(self) -> "Placement":
        """Connect every remote role's host (one connection per target); measure clock offsets.
        On failure the connections opened so far are closed."""
        by_target: dict[SshTarget, SshHost] = {}
        try:
            for role in self.remote_roles:
                t = self.entries[role].target()
                if t not in by_target:
                    by_target[t] = SshHost(name=f"{role}@{t.destination}", target=t).connect()
                self.hosts[role] = by_target[t]
            for role, h in self.hosts.items():
                self.clocks[role] = measure_offset(h)
                self.overheads_s[role] = command_overhead_s(h)
                self.sync[role] = sync_status(h)
        except BaseException:
            self.close()
            raise
        return self

    def latency_clock_warning(self) -> str | None:
        """Why one-way latency between the generator and the server would compare two clocks
        (None: both on one host). Engine latency is the receiver's clock minus the sender's."""
        gens = [r for r in self.generator_roles if r in self.entries]
        roles = set(gens) | {"server"}
        targets = {self.entries[r].target() if self.is_remote(r) else None for r in roles}
        if len(targets) <= 1:
            return None
        offs = {r: self.clocks[r] for r in roles if r in self.clocks}
        worst = max((c.uncertainty_s for c in offs.values()), default=0.0)
        return (f"one-way latency from {', '.join(gens)} to server compares the clocks of different hosts: "
                f"the offsets measured at the start are known to +-{worst * 1e6:.0f} us each; latency "
                f"figures smaller than that are flagged 'clocks-unsynced' (synchronise the clocks with PTP "
                f"for one-way figures)")

    def describe_role(self, role: str) -> dict:
        """What a trial record notes about a remote role's host."""
        h = self.host(role)
        return {**h.describe(), "ns": self.entry(role).ns,
                "command_overhead_s": self.overheads_s.get(hosts_role(role))}

    def close(self) -> None:
        seen: set[int] = set()
        for h in self.hosts.values():
            if id(h) not in seen:
                seen.add(id(h))
                h.close()

    def describe(self) -> dict:
        return {role: {**e.model_dump(exclude_defaults=True),
                       **({"clock_offset": self.clocks[role].to_dict()} if role in self.clocks else {})}
                for role, e in self.entries.items()}

    def __enter__(self) -> "Placement":
        return self.open()

    def __exit__(self, *exc) -> None:
        self.close()

