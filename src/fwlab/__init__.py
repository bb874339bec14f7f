"""fwlab: a firewall performance lab.

Layers, data flowing one way: suites -> testbed -> dut -> runners -> search -> results -> stats -> report.
"""

__version__ = "0.1.0"
