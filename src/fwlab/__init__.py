"""fwlab: a firewall performance lab.

Layers, data flowing one way: suites -> testbed -> dut -> runners -> search -> results -> stats -> report.
`fwlab.analysis.load.load(run_dir)` opens a stored run record for notebooks (see docs/analysis.md);
the package root holds only the version (every layer imports it, so it imports none).
"""

__version__ = "0.1.0"
