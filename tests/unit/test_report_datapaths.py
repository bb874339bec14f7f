"""The report names what each backend loaded (XDP program and attach mode) and labels no-rule
references readably."""

from fwlab.report.datapaths import render
from fwlab.report.summary import curves
from trials import full_trial


def _t(backend, layout, rules, family, pps):
    return full_trial({"kind": "stream", "mode": "routed", "backend": backend, "layout": layout, "rules": rules,
                       "stateful_shortcut": False, "ip_version": 4, "traffic": "engine", "size_bytes": 64, "streams": 1,
                       "repetition": 1, "ruleset_family": family, "rule_load_s": 0.01, "metrics": {"rx_pps": pps}})


def test_datapaths_table_names_program_and_attach_mode():
    trials = [_t("xdp", "linear", 0, "xdp linear (xdp_linear, native attach)", 1e5),
              _t("xdp-generic", "set", 100, "xdp set (xdp_map, generic attach)", 1e5),
              _t("none", "none", 0, "none", 1e5)]
    run = {"beds": [{"topology": {"mode": "routed"}, "backend": "xdp", "backend_version": "jit=1"}]}
    html = render(run, trials)
    assert "xdp linear (xdp_linear, native attach)" in html and "xdp_map, generic attach" in html
    assert "jit=1" in html and ">none<" not in html


def test_no_trials_no_table():
    assert render({}, []) == ""


def test_reference_without_rules_is_labelled_as_such():
    cs = curves([_t("xdp-pass", "none", 0, "xdp pass (xdp_pass, generic attach)", 1e5)])
    assert cs[0].label == "xdp-pass (no rules)"
