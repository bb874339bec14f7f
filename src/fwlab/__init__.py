"""fwlab: a firewall performance lab.

Layers, data flowing one way: suites -> testbed -> dut -> runners -> search -> results -> stats -> report.
`fwlab.load(run_dir)` opens a stored run record for notebooks (`fwlab.analysis.load.load`, see
docs/analysis.md). The package root holds the version, which every layer imports, and that one
entry point, imported only when first asked for (module ``__getattr__``), so that importing the
root imports no layer.
"""

__version__ = "0.1.0"

__all__ = ["__version__", "load"]


def __getattr__(name: str):
    if name == "load":  # lazy: the root is the shared bottom, the loader sits in analysis/
        from fwlab.analysis.load import load

        return load
    raise AttributeError(f"module 'fwlab' has no attribute {name!r}")
