"""A process fwlab spawns on this host gets SIGINT and SIGQUIT back at their defaults, even when
fwlab itself was started with them ignored (a shell's background job): fwlab stops its tools with
SIGINT, and an ignored SIGINT would leave each to run out its time-out."""

import signal
import subprocess
import sys
import textwrap

import pytest

from fwlab.testbed.host import default_signals_prefix

CHILD = textwrap.dedent("""
    import signal
    from fwlab.testbed.host import LocalHost
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # as a background job starts
    signal.signal(signal.SIGQUIT, signal.SIG_IGN)
    h = LocalHost()
    sp = h.spawn(["grep", "^SigIgn", "/proc/self/status"])
    out, _ = sp.proc.communicate(timeout=10)
    print(out.split()[1])
""")


@pytest.mark.skipif(not default_signals_prefix(), reason="env(1) here has no --default-signal (coreutils < 8.31)")
def test_a_spawned_tool_has_sigint_and_sigquit_at_their_defaults():
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=60, check=True)
    ignored = int(out.stdout.strip(), 16)
    assert not ignored & (1 << (signal.SIGINT - 1)), out.stdout
    assert not ignored & (1 << (signal.SIGQUIT - 1)), out.stdout
