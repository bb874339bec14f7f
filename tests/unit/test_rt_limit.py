"""The kernel's real-time limit: read with every napi bed, stated in the RFC 2544 section."""

from fwlab.report.section_rfc2544 import _rt_limit_note
from fwlab.testbed.readings import rt_limit


def _run(*limits):
    return {"beds": [{"device": {"device_model": "napi", "rt_limit": lim}} for lim in limits]}


def test_rt_limit_reads_this_host():
    lim = rt_limit()
    assert set(lim) == {"runtime_us", "period_us", "share"}
    if lim["runtime_us"] == -1:
        assert lim["share"] == 1.0
    elif lim["runtime_us"] is not None:
        assert lim["share"] == lim["runtime_us"] / lim["period_us"]


def test_the_default_limit_is_named_with_its_share():
    note = _rt_limit_note(_run({"runtime_us": 950000, "period_us": 1000000, "share": 0.95}))
    assert "950000 of every 1000000 µs (95 %)" in note and "warn" in note


def test_no_limit_and_no_record_say_so_or_nothing():
    assert "off on this host" in _rt_limit_note(_run({"runtime_us": -1, "period_us": 1000000, "share": 1.0}))
    assert _rt_limit_note({"beds": [{"device": {"device_model": "napi"}}]}) == ""
    assert "could not be read" in _rt_limit_note(_run({"runtime_us": None, "period_us": None, "share": None}))


def test_a_limit_that_changed_between_beds_is_a_warning():
    note = _rt_limit_note(_run({"runtime_us": 950000, "period_us": 1000000, "share": 0.95},
                               {"runtime_us": -1, "period_us": 1000000, "share": 1.0}))
    assert "changed between test beds" in note
