import signal
import sys
from pathlib import Path

# Tests import the package from the checkout (also when run outside the virtualenv).
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

# A job started in the background by a non-interactive shell inherits SIGINT as ignored, and so
# does every tool a test starts: curl, ping or the engine then outlive the SIGINT a runner stops
# them with, and each stop waits out its time-out (3 s per curl process). fwlab's CLI installs
# the handler itself (cli/parser.py main); the tests do the same, so they run as the CLI does.
signal.signal(signal.SIGINT, signal.default_int_handler)
