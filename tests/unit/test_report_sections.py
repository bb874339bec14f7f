from fwlab.report.sections import SECTIONS, Section, register, render_sections


def test_sections_render_only_their_kind_in_order():
    seen = {}

    def mk(kind, order):
        def render(run, trials):
            seen[kind] = [t["trial_id"] for t in trials]
            return f"<h2>{kind}</h2>"
        return register(Section(kind=kind, title=kind, render=render, order=order))

    mk("zz-test-b", 1)
    mk("zz-test-a", 2)
    try:
        trials = [{"kind": "zz-test-a", "trial_id": "a1"}, {"kind": "zz-test-b", "trial_id": "b1"},
                  {"kind": "stream", "trial_id": "s1"}]
        html = render_sections({}, trials)
        assert html[:2] == ["<h2>zz-test-b</h2>", "<h2>zz-test-a</h2>"]
        assert seen == {"zz-test-a": ["a1"], "zz-test-b": ["b1"]}
        assert render_sections({}, [{"kind": "stream", "trial_id": "s"}]) == []
    finally:
        del SECTIONS["zz-test-a"]
        del SECTIONS["zz-test-b"]
