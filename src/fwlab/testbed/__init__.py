"""The namespace test bed: topology description (``topology``), the host interface (``host``),
the life cycle of a bed (``bed``) and fwlab's namespaces by name (``namespaces``)."""

from fwlab.testbed.bed import Testbed
from fwlab.testbed.namespaces import clean_leftovers, list_fwl_namespaces, require_root
from fwlab.testbed.host import LocalHost, require_tool
from fwlab.testbed.topology import MODES, Offloads, Pinning, Topology, new_run_id

__all__ = ["Testbed", "clean_leftovers", "list_fwl_namespaces", "require_root", "LocalHost",
           "require_tool", "MODES", "Offloads", "Pinning", "Topology", "new_run_id"]
