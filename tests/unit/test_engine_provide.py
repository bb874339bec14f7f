"""Getting fwlab-engine onto a remote host (testbed.provide, testbed.cargo_build), against a fake
host that answers the commands it is sent from a small in-memory file system and records them:
same architecture -> the controller's build is copied; another architecture (or a copy that does
not run) -> built there with cargo, offline first; no cargo -> one line naming what is missing;
the build directory is removed on every exit path, the result by the shipping rule."""

from __future__ import annotations

import hashlib
import io
import subprocess
import tarfile

import pytest

from fwlab.errors import HostError
from fwlab.testbed.cargo_build import FIND_CARGO, source_digest, source_tarball
from fwlab.testbed.host import CommandTimeout, Host
from fwlab.testbed.provide import provide, ship_mode
from fwlab.testbed.ship import REMOTE_SHA

CACHE = "/var/tmp/fwlab-cache"
WORK = "/var/tmp/fwlab-build.k3J9xQ"
BUILT = b"\x7fELF built on the host by cargo"


class FakeHost(Host):
    """A Linux host of architecture ``arch``; ``cargo``: its path or None; ``builds``: what each
    ``cargo build`` answers in turn, (exit status, stderr) or an exception to raise."""

    remote = True

    def __init__(self, arch="x86_64", cargo="/root/.cargo/bin/cargo", builds=((0, ""),), system="Linux"):
        self.name, self.arch, self.cargo, self.builds = "client@lab", arch, cargo, list(builds)
        self._uname = system
        self.files: dict[str, bytes] = {}
        self.dirs: set[str] = set()
        self.sent: list[list[str]] = []
        self.envs: list[dict | None] = []
        self.spawned = []

    def under(self, d: str) -> list[str]:
        return sorted(p for p in self.files if p.startswith(d.rstrip("/") + "/"))

    def _ok(self, argv, out="", rc=0, err=""):
        return subprocess.CompletedProcess(argv, rc, out, err)

    def run(self, argv, ns=None, *, input=None, check=True, timeout_s=120.0, env=None):
        argv = list(argv)
        self.sent.append(argv)
        self.envs.append(env)
        if argv == ["uname", "-s"]:
            return self._ok(argv, self._uname + "\n")
        if argv == ["uname", "-m"]:
            return self._ok(argv, self.arch + "\n")
        if argv[:2] == ["sh", "-c"] and argv[2] == FIND_CARGO:
            return self._ok(argv, self.cargo + "\n") if self.cargo else self._ok(argv, rc=3)
        if argv[:2] == ["sh", "-c"] and argv[3] == "mk":
            if argv[4] in self.dirs:
                return self._ok(argv, "old\n")
            self.dirs.add(argv[4])
            return self._ok(argv, "new\n")
        if argv[:2] == ["sh", "-c"] and REMOTE_SHA in argv[2]:
            data = self.files.get(argv[4])
            return self._ok(argv, rc=3) if data is None else self._ok(argv, hashlib.sha256(data).hexdigest() + "\n")
        if argv[:2] == ["mktemp", "-d"]:
            self.dirs.add(WORK)
            return self._ok(argv, WORK + "\n")
        if argv[0] == "mkdir":
            self.dirs.add(argv[-1])
            return self._ok(argv)
        if argv[0] == "tar":
            with tarfile.open(fileobj=io.BytesIO(self.files[argv[2]]), mode="r:gz") as tar:
                for m in tar.getmembers():
                    self.files[f"{argv[4]}/{m.name}"] = tar.extractfile(m).read()
            return self._ok(argv)
        if argv[0] == self.cargo and argv[1] == "build":
            assert f"{argv[argv.index('--manifest-path') + 1]}" in self.files, "built before the sources were there"
            result = self.builds.pop(0)
            if isinstance(result, BaseException):
                raise result
            rc, err = result
            if rc == 0:
                self.files[f"{env['CARGO_TARGET_DIR']}/release/fwlab-engine"] = BUILT
            return self._ok(argv, rc=rc, err=err)
        if argv[:3] == ["cp", "-f", "--"]:
            self.files[argv[4]] = self.files[argv[3]]
            return self._ok(argv)
        if argv[:3] == ["mv", "-f", "--"]:
            self.files[argv[4]] = self.files.pop(argv[3])
            return self._ok(argv)
        if argv[0] == "chmod":
            return self._ok(argv)
        if argv[:3] == ["rm", "-f", "--"]:
            self.files.pop(argv[3], None)
            return self._ok(argv)
        if argv[:3] == ["rm", "-rf", "--"]:
            for p in self.under(argv[3]):
                del self.files[p]
            self.dirs = {d for d in self.dirs if not (d == argv[3] or d.startswith(argv[3] + "/"))}
            return self._ok(argv)
        if argv[:2] == ["rmdir", "--"]:
            if self.under(argv[2]):
                return self._ok(argv, rc=1, err="Directory not empty")
            self.dirs.discard(argv[2])
            return self._ok(argv)
        if argv[:2] == ["wc", "-c"]:
            return self._ok(argv, f"{len(self.files[argv[2]])} {argv[2]}\n")
        raise AssertionError(f"unexpected command {argv}")

    def write_file(self, path, data, mode=0o644):
        self.files[path] = data.encode() if isinstance(data, str) else data
        return path

    def spawn(self, argv, ns=None):
        raise AssertionError("nothing is spawned")

    def put_file(self, data, name, mode=0o644):
        raise AssertionError("no scratch files")

    def close(self):
        self._run_at_close()

    # what was done
    def ran(self, word: str) -> list[list[str]]:
        return [a for a in self.sent if word in a]


@pytest.fixture
def engine(tmp_path):
    """A local 'build' and a cargo source tree (with a target/ that must not be packed)."""
    local = tmp_path / "fwlab-engine"
    local.write_bytes(b"\x7fELF the controller's x86_64 build")
    src = tmp_path / "engine"
    (src / "src").mkdir(parents=True)
    (src / "Cargo.toml").write_text('[package]\nname = "fwlab-engine"\n')
    (src / "Cargo.lock").write_text("# lock\n")
    (src / "src" / "main.rs").write_text("fn main() {}\n")
    (src / "target" / "release").mkdir(parents=True)
    (src / "target" / "release" / "fwlab-engine").write_bytes(b"big binary")
    return local, src


def _provide(h, engine, runs=(BUILT,), **kw):
    """provide() with a check that accepts the contents in ``runs`` (what 'answers version')."""
    local, src = engine

    def check(path):
        return None if h.files.get(path) in runs else "exit 126: cannot execute binary file"
    return provide(h, str(local), "fwlab-engine", source_dir=lambda: src, cache_dir=CACHE, keep=False,
                   check=check, **kw)


def _local_runs(engine):
    return (engine[0].read_bytes(), BUILT)


def test_same_architecture_copies_the_controllers_build(engine, monkeypatch):
    monkeypatch.delenv("FWLAB_SHIP", raising=False)
    h = FakeHost(arch="amd64")  # uname -m spelling of x86_64 on BSD-ish hosts: normalised
    monkeypatch.setattr("platform.machine", lambda: "x86_64")
    s = _provide(h, engine, runs=_local_runs(engine))
    digest = hashlib.sha256(engine[0].read_bytes()).hexdigest()
    assert (s.method, s.cached, s.why_built) == ("copied", False, None)
    assert s.path == f"{CACHE}/fwlab-engine-{digest}" and h.files[s.path] == engine[0].read_bytes()
    assert not h.ran("build") and not any(a[0] == "mktemp" for a in h.sent)  # cargo never asked
    assert s.to_dict()["method"] == "copied"
    h.close()
    assert h.files == {} and CACHE not in h.dirs


def test_another_architecture_is_built_there_with_cargo(engine, monkeypatch):
    monkeypatch.delenv("FWLAB_SHIP", raising=False)
    monkeypatch.setattr("platform.machine", lambda: "x86_64")
    h = FakeHost(arch="aarch64")
    s = _provide(h, engine)
    assert s.method == "built" and not s.cached
    assert "Linux x86_64 binary and host client@lab runs Linux aarch64" in s.why_built
    assert s.path == f"{CACHE}/fwlab-engine-src-{source_digest(engine[1])}" and h.files[s.path] == BUILT
    assert s.sha256 == hashlib.sha256(BUILT).hexdigest() and s.size_bytes == len(BUILT)
    (build,) = h.ran("build")
    assert build[-1] == "--offline" and "--release" in build and "--locked" in build
    assert h.envs[h.sent.index(build)] == {"CARGO_TARGET_DIR": f"{WORK}/target"}
    # the controller's binary was never copied; the packed sources left target/ out
    assert engine[0].read_bytes() not in h.files.values()
    with tarfile.open(fileobj=io.BytesIO(source_tarball(engine[1])), mode="r:gz") as tar:
        assert sorted(tar.getnames()) == ["Cargo.lock", "Cargo.toml", "src/main.rs"]
    # the build directory is gone already; the binary goes at the end of the run
    assert h.under(WORK) == [] and WORK not in h.dirs
    h.close()
    assert h.files == {} and CACHE not in h.dirs


def test_offline_build_lacking_crates_is_retried_online(engine, monkeypatch):
    monkeypatch.setattr("platform.machine", lambda: "x86_64")
    h = FakeHost(arch="aarch64", builds=[
        (101, "error: failed to download `clap v4.6.0`\n\nCaused by:\n  attempting to make an HTTP request, "
              "but --offline was specified"), (0, "")])
    s = _provide(h, engine)
    assert s.method == "built"
    first, second = h.ran("build")
    assert first[-1] == "--offline" and "--offline" not in second
    assert h.under(WORK) == []


def test_no_cargo_is_one_clear_line_and_leaves_nothing(engine, monkeypatch):
    monkeypatch.setattr("platform.machine", lambda: "x86_64")
    h = FakeHost(arch="aarch64", cargo=None)
    with pytest.raises(HostError) as e:
        _provide(h, engine)
    line = e.value.one_line()
    assert "\n" not in line
    assert "cannot put fwlab-engine on host client@lab: fwlab-engine built here is a Linux x86_64 binary " \
           "and host client@lab runs Linux aarch64, and the host has no cargo to build it there" in line
    assert "install Rust's cargo on that host (https://rustup.rs" in line
    assert h.files == {} and h.dirs == set() and not any(a[0] == "mktemp" for a in h.sent)


@pytest.mark.parametrize("failure, message", [
    ((101, "   Compiling fwlab-engine v0.1.0\nerror[E0425]: cannot find value `x` in this scope\n"),
     "failed: error[E0425]: cannot find value `x` in this scope"),
    (CommandTimeout("'cargo build' did not finish within 900 s"), "took longer than 900 s"),
])
def test_a_failed_build_cleans_up_everything(engine, monkeypatch, failure, message):
    monkeypatch.setattr("platform.machine", lambda: "x86_64")
    h = FakeHost(arch="aarch64", builds=[failure])
    with pytest.raises(HostError, match="fwlab-engine") as e:
        _provide(h, engine)
    assert message in e.value.one_line()
    assert len(h.ran("build")) == 1  # a compile error is not retried online
    assert h.files == {} and h.dirs == set()  # build dir and the cache dir fwlab made: gone
    h.close()  # the close-time backstop finds nothing left to remove
    assert h.files == {}


def test_an_interrupted_build_still_removes_its_directory(engine, monkeypatch):
    monkeypatch.setattr("platform.machine", lambda: "x86_64")
    h = FakeHost(arch="aarch64", builds=[KeyboardInterrupt()])
    with pytest.raises(KeyboardInterrupt):
        _provide(h, engine)
    assert h.files == {} and h.dirs == set()


def test_a_copy_that_does_not_run_there_is_replaced_by_a_build(engine, monkeypatch):
    monkeypatch.delenv("FWLAB_SHIP", raising=False)
    monkeypatch.setattr("platform.machine", lambda: "x86_64")
    h = FakeHost(arch="x86_64")  # same architecture, but (say) another C library: the copy fails
    s = _provide(h, engine, runs=(BUILT,))
    assert s.method == "built" and "the copy of fwlab-engine does not run there (exit 126" in s.why_built
    assert h.under(CACHE) == [s.path]  # the copy that did not run is gone at once
    # FWLAB_SHIP=copy refuses instead of building
    monkeypatch.setenv("FWLAB_SHIP", "copy")
    h = FakeHost(arch="x86_64")
    with pytest.raises(HostError, match="copied to host client@lab does not run there"):
        _provide(h, engine, runs=(BUILT,))
    assert not h.ran("build")


def test_ship_modes(engine, monkeypatch):
    monkeypatch.setattr("platform.machine", lambda: "x86_64")
    monkeypatch.setenv("FWLAB_SHIP", "build")  # forced: builds even where the copy would run
    h = FakeHost(arch="x86_64")
    s = _provide(h, engine, runs=_local_runs(engine))
    assert s.method == "built" and s.why_built == "FWLAB_SHIP=build asks for a build on the host"
    monkeypatch.setenv("FWLAB_SHIP", "copy")
    with pytest.raises(HostError, match="runs Linux aarch64") as e:
        _provide(FakeHost(arch="aarch64"), engine)
    assert "unset FWLAB_SHIP" in e.value.one_line()
    monkeypatch.setenv("FWLAB_SHIP", "sometimes")
    with pytest.raises(HostError, match="FWLAB_SHIP='sometimes' is not one of auto, copy, build"):
        ship_mode()
    monkeypatch.delenv("FWLAB_SHIP")
    with pytest.raises(HostError, match="runs on Linux only"):
        _provide(FakeHost(system="OpenBSD", arch="amd64"), engine)


def test_a_kept_build_is_reused_by_its_source_digest(engine, monkeypatch):
    monkeypatch.setattr("platform.machine", lambda: "x86_64")
    local, src = engine
    h = FakeHost(arch="aarch64", builds=[(0, ""), (0, "")])
    first = provide(h, str(local), "fwlab-engine", source_dir=lambda: src, cache_dir=CACHE, keep=True,
                    check=lambda p: None)
    h.close()
    assert h.under(CACHE) == [first.path]  # kept
    h.sent.clear()
    again = provide(h, str(local), "fwlab-engine", source_dir=lambda: src, cache_dir=CACHE, keep=True,
                    check=lambda p: None)
    assert again.cached and again.path == first.path and not h.ran("build")
    # another source is another build
    (src / "src" / "main.rs").write_text("fn main() { }\n")
    other = provide(h, str(local), "fwlab-engine", source_dir=lambda: src, cache_dir=CACHE, keep=True,
                    check=lambda p: None)
    assert not other.cached and other.path != first.path and len(h.ran("build")) == 1


def test_a_kept_build_that_does_not_run_is_built_afresh(engine, monkeypatch):
    monkeypatch.setattr("platform.machine", lambda: "x86_64")
    local, src = engine
    h = FakeHost(arch="aarch64", builds=[(0, ""), (0, "")])
    first = _provide(h, engine)
    h.files[first.path] = b"damaged"  # as if left by an earlier run with keep_engine
    h.dirs.add(CACHE)
    again = _provide(h, engine)
    assert not again.cached and h.files[again.path] == BUILT and len(h.ran("build")) == 2


def test_engine_sources_are_found_beside_the_binary(tmp_path, monkeypatch):
    from fwlab.runners.engine_binary import engine_source_dir

    tree = tmp_path / "engine"
    (tree / "target" / "release").mkdir(parents=True)
    (tree / "Cargo.toml").write_text("")
    monkeypatch.delenv("FWLAB_ENGINE_SRC", raising=False)
    assert engine_source_dir(str(tree / "target" / "release" / "fwlab-engine")) == tree.resolve()
    monkeypatch.setenv("FWLAB_ENGINE_SRC", str(tmp_path / "elsewhere"))
    assert engine_source_dir(str(tree / "target" / "release" / "fwlab-engine")) == tmp_path / "elsewhere"
    with pytest.raises(HostError, match="holds no Cargo.toml"):
        source_digest(tmp_path / "elsewhere")
