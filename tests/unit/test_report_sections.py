from fwlab.report.sections import SECTIONS, Section, _load_builtin, register, render_sections
from trials import full_trial


def test_sections_render_only_their_kind_in_order():
    """Two sections registered for two kinds (standing in for the built-in ones of rtt and
    transactions): each renders only its kind's trials, in the sections' order."""
    seen = {}

    def mk(kind, order):
        def render(run, trials):
            seen[kind] = [t.trial_id for t in trials]
            return f"<h2>{kind}</h2>"
        return register(Section(kind=kind, title=kind, render=render, order=order))

    _load_builtin()
    saved = {k: SECTIONS.get(k) for k in ("rtt", "transactions")}
    for k in saved:
        del SECTIONS[k]
    try:
        mk("transactions", -2)
        mk("rtt", -1)
        trials = [{"kind": "rtt", "trial_id": "a1"}, {"kind": "transactions", "trial_id": "b1"},
                  {"kind": "ruleset-class", "trial_id": "s1"}]
        html = render_sections({}, [full_trial(t) for t in trials])
        assert html[:2] == ["<h2>transactions</h2>", "<h2>rtt</h2>"]
        assert seen == {"rtt": ["a1"], "transactions": ["b1"]}
        assert render_sections({}, [full_trial({"kind": "ruleset-class", "trial_id": "s"})]) == []
    finally:
        for k, s in saved.items():
            del SECTIONS[k]
            register(s)
