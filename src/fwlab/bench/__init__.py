"""Benchmarks of fwlab's own tools (``fwlab bench ...``): how good a generator is, not how good a
firewall is. Each benchmark builds its own test bed and tears it down."""
