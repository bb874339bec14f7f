"""Background floods from the attacker namespace while a trial measures legitimate traffic.

``flood`` runs one flood (fwlab-engine's AF_PACKET backend, spoofed sources, duration-bounded)
and counts it on the attacker's link, at the DUT (link and rule counters) and at the server's
ingress. What a suite's ``[[background]]`` item may say is suite data: :mod:`fwlab.suites.background`.
"""
