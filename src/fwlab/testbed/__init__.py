"""The namespace test bed: topology description (``topology``), the host interface (``host``)
and the life cycle of the namespaces (``bed``)."""

from fwlab.testbed.bed import Testbed, clean_leftovers, list_fwl_namespaces, require_root
from fwlab.testbed.host import LocalHost, require_tool
from fwlab.testbed.topology import MODES, Offloads, Pinning, Topology, new_run_id

__all__ = ["Testbed", "clean_leftovers", "list_fwl_namespaces", "require_root", "LocalHost",
           "require_tool", "MODES", "Offloads", "Pinning", "Topology", "new_run_id"]
