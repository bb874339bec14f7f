"""fwlab: a firewall performance lab.

Layers, data flowing one way: suites -> testbed -> dut -> runners -> search -> results -> stats -> report.
`fwlab.load(run_dir)` opens a stored run record for notebooks (see docs/analysis.md).
"""

__version__ = "0.1.0"


def load(run_dir):
    """Load a stored run record: a `fwlab.analysis.load.Run` (``.trials``, ``.to_dataframe()``)."""
    from fwlab.analysis.load import load as _load

    return _load(run_dir)
