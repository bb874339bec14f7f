"""Your own rule set: ``fwlab run --ruleset`` (run), its class mix (mix) and ``fwlab optimize``."""
