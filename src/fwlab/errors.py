"""The one exception root of fwlab.

Every error a user can cause or fix carries a one-line message naming the problem and a `fix`
naming what to do. The CLI prints both on one line and exits (docs/cli.md) with 2 for bad input,
or with the error's `exit_status` when it was raised while a measurement ran: 1 for a
`MeasurementFailed` (the test bed, a backend, a traffic tool or a search failed; a host that
cannot be reached is a hosts-file problem: 2).
"""

from __future__ import annotations


class FwlabError(Exception):
    """Root of every fwlab error."""

    #: the CLI's exit status for this error: 2 bad input; subclasses for failures of a
    #: measurement that ran say 1 (`MeasurementFailed`)
    exit_status: int = 2

    def __init__(self, message: str, fix: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.fix = fix

    def one_line(self) -> str:
        text = " ".join(self.message.splitlines()).strip()
        if self.fix:
            text += f" (fix: {' '.join(self.fix.splitlines())})"
        return text


class MeasurementFailed(FwlabError):
    """The input was good and the measurement ran, but it failed (exit status 1)."""

    exit_status = 1


class SuiteError(FwlabError):
    """A suite definition is malformed or names something unknown."""


class ToolMissing(FwlabError):
    """An external program fwlab needs is not installed."""


class NotRoot(FwlabError):
    """The operation needs root (network namespaces, nftables)."""


class TestbedError(MeasurementFailed):
    """Building or tearing down the namespace test bed failed."""


class BackendError(MeasurementFailed):
    """A firewall backend could not render, load, read or flush a rule set."""


class RulesetRefused(BackendError):
    """A rule set the user gave (``--ruleset``, ``optimize``) cannot be read or the kernel refused
    it: bad input (exit status 2), even when it was found while the test bed stood."""

    exit_status = 2


class RunnerError(MeasurementFailed):
    """A traffic tool failed or its output could not be parsed."""


class RecordError(FwlabError):
    """A run record is missing, of an unknown version, or inconsistent."""


class SearchError(MeasurementFailed):
    """A load search was given bad goals or its measurer misbehaved."""


class HostError(FwlabError):
    """A remote host could not be reached or used over SSH, or its hosts-file entry is wrong."""
