"""In-kernel measurement: fwlab's own BPF clock timing the firewall per packet.

``brackets`` plans where the probe goes (the DUT's base chains), ``histogram`` reads its
buckets, ``build`` compiles it, ``reference`` is the fixed reference chain timed on the same
packets, ``kclock`` runs it around a trial (:class:`fwlab.probes.kclock.CostProbe`) and ``cost``
turns its results into cost figures. See docs/kernel-cost.md.
"""
