"""The report's and the trend dashboard's interactive plots render in a real browser: a rebuilt
record's page (and a trend page), opened from disk in headless chromium with every network name
unresolvable (plotly.js must come from beside the page, not a CDN), has each plot drawn by plotly
(its SVG layers and one trace per series in the DOM), the static SVG kept. Skips cleanly where no
chromium is installed."""

import re
import shutil
import subprocess

import pytest
from goldens import GOLDEN

from fwlab.report import write_report
from fwlab.webpage import PLOTLY_JS

BROWSER = next((b for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)


def dump_dom(page) -> str:
    """The page's DOM after its scripts ran (chromium --dump-dom), offline."""
    cmd = [BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
           "--host-resolver-rules=MAP * ~NOTFOUND", "--virtual-time-budget=15000", "--window-size=1280,2000",
           "--dump-dom", page.as_uri()]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def check_plots_drawn(page, at_least: int) -> None:
    """Every interactive plot of ``page`` is drawn by plotly in headless chromium."""
    assert (page.parent / PLOTLY_JS).stat().st_size > 1_000_000  # plotly.js itself, beside the page
    html = page.read_text()
    ids = re.findall(r"<div class='iplot' id='([^']+)'>", html)
    assert len(ids) >= at_least
    assert "cdn" not in html.lower()
    dom = dump_dom(page)
    for ident in ids:
        at = dom.find(f'id="{ident}"')
        assert at >= 0, ident
        box = dom[dom.rfind("<figure", 0, at):dom.find("</figure>", at)]
        assert "live" in box[:80], f"{ident}: the script did not take over from the static SVG"
        assert box.count('class="main-svg"') >= 2, f"{ident}: plotly drew nothing"
        assert re.search(r'class="trace scatter', box), f"{ident}: no series drawn"
        assert len(re.findall(r'class="point[ "]', box)) >= 2, f"{ident}: no data points drawn"
        assert "<svg" in box.split('class="iplot"')[0], f"{ident}: the static SVG is gone from the page"


@pytest.mark.skipif(BROWSER is None, reason="no chromium on this machine (apt-get install chromium)")
def test_the_plots_of_a_rebuilt_report_render_in_headless_chromium(tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(GOLDEN / "run-tiny", run_dir)
    check_plots_drawn(write_report(run_dir), at_least=2)  # a rate plot per traffic


@pytest.mark.skipif(BROWSER is None, reason="no chromium on this machine (apt-get install chromium)")
def test_the_trend_dashboard_renders_in_headless_chromium(tmp_path):
    from synthetic_runs import write_series

    from fwlab.analysis.trend import trend
    from fwlab.analysis.trend_page import write_page

    write_series(tmp_path / "runs", 4, change_at=2)
    check_plots_drawn(write_page(trend([tmp_path / "runs"]), tmp_path / "trend.html"), at_least=16)
