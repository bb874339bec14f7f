"""Analysis of stored run records: figures, noise baselines, run-to-run comparison, trends, exports.

Owns: turning one or more run records into named figures (`figures`), the noise model of
repeated baseline runs (`baseline`), the comparison of two runs (`compare`) and the report's
"changed since" section built from it (`changed_since`), trends over many runs grouped with
jumpavg (`trend`, page in `trend_page`), loading a record for notebooks and pandas (`load`) and the export of a record to CSV, JSON, long-format series and flent's
`.flent.gz` format (`export`). Reads records only through `fwlab.results.record`; the
statistics themselves live in `fwlab.stats`. Never touches the test bed, firewalls or traffic,
and never runs a suite (`fwlab.run.baseline.measure_baseline` runs the N runs of a baseline).
"""
