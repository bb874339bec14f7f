"""Files a user names: bounded reads of inputs, safe writes of outputs.

Owns: reading an input file (regular files only: a FIFO, a device or a directory is refused
before anything blocks on it; a size limit; strict UTF-8), parsing TOML and JSON with a nesting
limit (a deeply nested file is one error, not a RecursionError), and writing an output file:
checked before the work starts (`check_output`: not a directory, device, FIFO, nothing under
/proc, /sys or /dev, the parent directory must exist and be writable, and never a run record's
own ``run.json`` / ``trials.jsonl``), then written to a temporary file beside it and renamed
over it (`write_output`), so a failed write leaves the old file as it was. No parent directory is
created. Every failure is a `FwlabError` (one line, with a fix). Never touches: what the files
mean (suites, records, reports own that).
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
import tempfile
import tomllib
from pathlib import Path
from typing import Any

from fwlab.errors import FwlabError

#: a run record's primary files: written only by ``fwlab run`` and its resume (fwlab.results.store)
RECORD_FILES = ("run.json", "trials.jsonl")
#: the largest hand-written input fwlab reads (suite, hosts file, mix, adapter, rule set) [bytes]
MAX_INPUT_BYTES = 32 * 1024 * 1024
#: the largest record file fwlab reads (a trials.jsonl of a very long run) [bytes]
MAX_RECORD_BYTES = 1024 * 1024 * 1024
#: the deepest nesting of tables/arrays (TOML) or objects/arrays (JSON) fwlab reads
MAX_DEPTH = 64
#: places no output goes: kernel interfaces and device nodes
_SYSTEM_TREES = ("/proc", "/sys", "/dev")
#: what a name taken from a file may be to become part of a default output file name
_FILE_PART = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,99}")


def _short(path: Path | str) -> str:
    s = str(path)
    return s if len(s) <= 200 else s[:200] + "..."


# -- reading ---------------------------------------------------------------------------------------

def read_bytes(path: Path | str, what: str, error: type[FwlabError] = FwlabError, fix: str = "check the path",
               max_bytes: int = MAX_INPUT_BYTES) -> bytes:
    """The bytes of a regular file of at most `max_bytes`; `error` (one line) otherwise.

    Opened non-blocking and checked with fstat before reading, so a FIFO (which would block until
    a writer came) or a device is refused, not read."""
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise error(f"{what} {_short(path)} does not exist", fix="check the path") from None
    except PermissionError:
        raise error(f"{what} {_short(path)} cannot be read: permission denied",
                    fix="check its permissions, or read it as the user that wrote it") from None
    except (OSError, ValueError) as exc:  # a name too long, a NUL byte, a loop of links, ...
        why = getattr(exc, "strerror", None) or str(exc)
        raise error(f"{what} path {_short(path)!r} is not usable: {why}", fix="check the path") from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise error(f"{what} {_short(path)} is a directory, not a file", fix=fix)
        if not stat.S_ISREG(st.st_mode):
            kind = ("a FIFO" if stat.S_ISFIFO(st.st_mode) else "a device" if stat.S_ISCHR(st.st_mode)
                    or stat.S_ISBLK(st.st_mode) else "a socket" if stat.S_ISSOCK(st.st_mode) else "not a regular file")
            raise error(f"{what} {_short(path)} is {kind}, not a regular file", fix=fix)
        if st.st_size > max_bytes:
            raise error(f"{what} {_short(path)} is {st.st_size} bytes, more than the {max_bytes} fwlab reads",
                        fix=fix)
        os.set_blocking(fd, True)
        chunks, total = [], 0
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            total += len(chunk)
            if total > max_bytes:  # grew while read
                raise error(f"{what} {_short(path)} is more than the {max_bytes} bytes fwlab reads", fix=fix)
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError as exc:
        raise error(f"{what} {_short(path)} cannot be read: {exc.strerror or exc}",
                    fix="check the file and its permissions") from None
    finally:
        os.close(fd)


def read_text(path: Path | str, what: str, error: type[FwlabError] = FwlabError, fix: str = "give a text file",
              max_bytes: int = MAX_INPUT_BYTES) -> str:
    """`read_bytes` decoded as strict UTF-8 (a byte that does not decode is named)."""
    data = read_bytes(path, what, error, fix, max_bytes)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"{what} {_short(path)} is not UTF-8 text (byte {exc.start} cannot be decoded)", fix=fix) from None


def kind(path: Path | str) -> str:
    """What `path` is, without raising: "file" (regular), "dir", "missing", "denied" (a directory
    on the way cannot be searched by this user) or "other" (FIFO, device, socket, unusable name)."""
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return "missing"
    except PermissionError:
        return "denied"
    except (OSError, ValueError):
        return "other"
    return "file" if stat.S_ISREG(st.st_mode) else "dir" if stat.S_ISDIR(st.st_mode) else "other"


def depth(obj: Any) -> int:
    """How deeply dicts and lists nest in `obj` (a scalar: 0), counted without recursion."""
    deepest, stack = 0, [(obj, 1)]
    while stack:
        x, d = stack.pop()
        if isinstance(x, dict):
            items = x.values()
        elif isinstance(x, list | tuple):
            items = x
        else:
            continue
        deepest = max(deepest, d)
        stack.extend((y, d + 1) for y in items if isinstance(y, dict | list | tuple))
    return deepest


def _too_deep(where: str, error: type[FwlabError], fix: str) -> FwlabError:
    return error(f"{where} nests tables or lists more than {MAX_DEPTH} deep", fix=fix)


def loads_toml(text: str, where: str, error: type[FwlabError] = FwlabError,
               fix: str = "correct the TOML syntax") -> dict[str, Any]:
    """Parse TOML; `error` naming `where` if it is not TOML or nests more than `MAX_DEPTH` deep."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{where} is not valid TOML: {exc}", fix=fix) from None
    except RecursionError:
        raise _too_deep(where, error, "flatten it") from None
    if depth(data) > MAX_DEPTH:
        raise _too_deep(where, error, "flatten it")
    return data


def loads_json(text: str | bytes, where: str, error: type[FwlabError] = FwlabError,
               fix: str = "restore it from a backup", finite: bool = False) -> Any:
    """Parse JSON; `error` naming `where` if it is not JSON, nests more than `MAX_DEPTH` deep or
    (`finite`) holds NaN or Infinity."""
    def refuse(const: str):
        raise ValueError(f"{const} is not a number JSON allows")

    try:
        return _checked_depth(json.loads(text, parse_constant=refuse if finite else None), where, error)
    except RecursionError:
        raise _too_deep(where, error, fix) from None
    except ValueError as exc:  # JSONDecodeError is a ValueError; so is a refused NaN
        raise error(f"{where} is not valid JSON: {getattr(exc, 'msg', None) or exc}", fix=fix) from None


def _checked_depth(obj: Any, where: str, error: type[FwlabError]) -> Any:
    if depth(obj) > MAX_DEPTH:
        raise _too_deep(where, error, "restore it from a backup")
    return obj


def non_finite(obj: Any, path: str = "") -> str | None:
    """The dotted path of the first NaN or infinite float in `obj`, or None."""
    stack = [(obj, path)]
    while stack:
        x, p = stack.pop()
        if isinstance(x, float) and not math.isfinite(x):
            return p or "(value)"
        if isinstance(x, dict):
            stack.extend((v, f"{p}.{k}" if p else str(k)) for k, v in x.items())
        elif isinstance(x, list | tuple):
            stack.extend((v, f"{p}[{i}]") for i, v in enumerate(x))
    return None


def file_part(name: Any, what: str, fix: str) -> str:
    """`name` (read from a file: a suite's name) checked to be usable in a default output file
    name: letters, digits, ``. _ + -``, not starting with a dot, at most 100 characters; no ``/``,
    no ``..``. FwlabError otherwise."""
    if not isinstance(name, str) or not _FILE_PART.fullmatch(name):
        raise FwlabError(f"{what} {str(name)[:60]!r} cannot name a file (letters, digits, '.', '_', '+', '-' only)",
                         fix=fix)
    return name


def as_file_part(name: str) -> str:
    """`name` made usable in a file name we choose ourselves: every character outside letters,
    digits and ``. _ + -`` becomes ``_``, a leading dot too, at most 100 characters."""
    out = re.sub(r"[^A-Za-z0-9._+-]", "_", str(name))[:100]
    return "_" + out[1:] if not out or out[0] == "." else out


# -- writing ---------------------------------------------------------------------------------------

def record_file(path: Path) -> bool:
    """Whether `path` (resolved) is a run record's own ``run.json`` or ``trials.jsonl``: its name
    is one of them and its directory holds a record."""
    return path.name in RECORD_FILES and any((path.parent / f).exists() for f in RECORD_FILES)


def _system_tree(path: Path) -> str | None:
    s = str(path)
    return next((t for t in _SYSTEM_TREES if s == t or s.startswith(t + "/")), None)


def check_output(path: Path | str, what: str = "output file") -> Path:
    """The resolved path an output file may be written to, or FwlabError (one line, with a fix)
    saying why not. Call it before the work whose result goes there."""
    raw = str(path)
    if not raw or "\x00" in raw:
        raise FwlabError(f"{what} path {raw[:80]!r} is not usable", fix="name a file, e.g. ./out.csv")
    try:
        real = Path(os.path.realpath(raw))
        lexists = os.path.lexists(real)
        st = os.stat(real) if lexists else None
    except (OSError, ValueError) as exc:
        raise FwlabError(f"{what} {_short(raw)} is not usable: {getattr(exc, 'strerror', None) or exc}",
                         fix="name a file in an existing directory") from None
    shown = _short(raw) if str(real) == os.path.abspath(raw) else f"{_short(raw)} (that is {_short(real)})"
    if tree := _system_tree(real):
        raise FwlabError(f"{what} {shown} is under {tree}, where no output goes",
                         fix="name a file in a directory of your own, e.g. ./out")
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise FwlabError(f"{what} {shown} is a directory", fix=f"name a file inside it, e.g. {_short(raw.rstrip('/'))}/NAME")
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise FwlabError(f"{what} {shown} is not a regular file (a device, FIFO or socket)",
                         fix="name a regular file")
    if record_file(real):
        raise FwlabError(f"{what} {shown} is a run record's own {real.name}: fwlab never writes over a record",
                         fix=f"name another file, e.g. {_short(real.parent)}/export.{'csv' if 'csv' in what else 'out'}")
    parent = real.parent
    if not parent.exists():
        raise FwlabError(f"{what} {shown}: directory {_short(parent)} does not exist",
                         fix=f"create it first (mkdir -p {_short(parent)}) or name a file in an existing directory")
    if not parent.is_dir():
        raise FwlabError(f"{what} {shown}: {_short(parent)} is not a directory", fix="name a file in a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise FwlabError(f"{what} {shown}: directory {_short(parent)} is not writable for this user",
                         fix="name a file in a directory you can write, or check its permissions")
    if st is not None and not os.access(real, os.W_OK):
        raise FwlabError(f"{what} {shown} is not writable for this user", fix="name another file, or check its permissions")
    return real


def check_output_dir(path: Path | str, what: str = "output directory", create: bool = True) -> Path:
    """The resolved directory output files may go into: an existing writable directory, or (with
    `create`) a new one made in an existing parent (only the last component is created)."""
    raw = str(path)
    if not raw or "\x00" in raw:
        raise FwlabError(f"{what} path {raw[:80]!r} is not usable", fix="name a directory")
    real = Path(os.path.realpath(raw))
    if tree := _system_tree(real):
        raise FwlabError(f"{what} {_short(raw)} is under {tree}, where no output goes",
                         fix="name a directory of your own")
    if real.exists():
        if not real.is_dir():
            raise FwlabError(f"{what} {_short(raw)} exists and is not a directory", fix="name a directory")
    else:
        if not real.parent.is_dir():
            raise FwlabError(f"{what} {_short(raw)}: directory {_short(real.parent)} does not exist",
                             fix=f"create it first (mkdir -p {_short(real.parent)})")
        if not create:
            raise FwlabError(f"{what} {_short(raw)} does not exist", fix=f"create it first (mkdir {_short(raw)})")
        try:
            real.mkdir()
        except OSError as exc:
            raise FwlabError(f"{what} {_short(raw)} cannot be created: {exc.strerror or exc}",
                             fix="name a directory you can write") from None
    if not os.access(real, os.W_OK | os.X_OK):
        raise FwlabError(f"{what} {_short(raw)} is not writable for this user",
                         fix="name a directory you can write, or check its permissions")
    return real


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_output(path: Path | str, data: str | bytes, what: str = "output file") -> Path:
    """Write `data` to `path` safely (`check_output` first): into a temporary file in the same
    directory, flushed to disk, then renamed over `path`. On any failure the temporary file is
    removed, `path` is as it was, and FwlabError says why. Returns the path written."""
    real = check_output(path, what)
    blob = data.encode("utf-8") if isinstance(data, str) else data
    try:
        mode = stat.S_IMODE(os.stat(real).st_mode) if real.exists() else 0o666 & ~_umask()
    except OSError:
        mode = 0o644
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=real.parent, prefix=f".{real.name[:80]}.", suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            fh.write(blob)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, real)
        tmp = None
    except OSError as exc:
        raise FwlabError(f"{what} {_short(path)} could not be written: {exc.strerror or exc}",
                         fix="free space on its file system or name another file") from None
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
    return Path(path)
