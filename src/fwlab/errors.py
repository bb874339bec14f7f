"""The one exception root of fwlab.

Every error a user can cause or fix carries a one-line message naming the problem and a `fix`
naming what to do. The CLI prints both on one line and exits with status 2.
"""

from __future__ import annotations


class FwlabError(Exception):
    """Root of every fwlab error."""

    def __init__(self, message: str, fix: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.fix = fix

    def one_line(self) -> str:
        text = " ".join(self.message.splitlines()).strip()
        if self.fix:
            text += f" (fix: {' '.join(self.fix.splitlines())})"
        return text


class SuiteError(FwlabError):
    """A suite definition is malformed or names something unknown."""


class ToolMissing(FwlabError):
    """An external program fwlab needs is not installed."""


class NotRoot(FwlabError):
    """The operation needs root (network namespaces, nftables)."""


class TestbedError(FwlabError):
    """Building or tearing down the namespace test bed failed."""


class BackendError(FwlabError):
    """A firewall backend could not render, load, read or flush a rule set."""


class RunnerError(FwlabError):
    """A traffic tool failed or its output could not be parsed."""


class RecordError(FwlabError):
    """A run record is missing, of an unknown version, or inconsistent."""


class SearchError(FwlabError):
    """A load search was given bad goals or its measurer misbehaved."""


class HostError(FwlabError):
    """A remote host could not be reached or used over SSH, or its hosts-file entry is wrong."""
