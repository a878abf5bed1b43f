"""The HTML report in a real browser: every example's page opened in headless Chromium from a
file:// URL, its timeline laid out (each lane, series line, phase band and marker has a box with
an area), nothing fetched and no error on the console.

Slow (a browser start per page) and optional: it needs Debian's `chromium` (/usr/bin/chromium)
and is skipped, saying so, where that is absent (CI images without a browser).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import FIXTURES, run_cli

pytestmark = pytest.mark.slow

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
EXAMPLES = sorted((FIXTURES.parent.parent / "examples").glob("*.log"))
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--enable-logging=stderr", "--v=0", "--virtual-time-budget=5000"]

# Added to a copy of the page for the test only (the report itself has no script): it measures
# the chart's elements and lists what the page fetched and any error, into the DOM that
# --dump-dom prints.
PROBE = """<script>
(function () {
  var errors = [];
  window.addEventListener("error", function (e) { errors.push(String(e.message)); });
  var sel = "svg.timeline, svg.timeline g.lane, svg.timeline polyline.series, svg.timeline circle.dot, svg.timeline .marker, " +
            "svg.timeline rect.phase, svg.timeline .axis";
  var boxes = [], flat = [];
  document.querySelectorAll(sel).forEach(function (el) {
    var b = el.getBoundingClientRect();
    var name = el.tagName + "#" + (el.id || "") + "." + (el.getAttribute("class") || "");
    boxes.push(name);
    // a series line may be flat (a figure that never moved): one side is enough for it
    var line = el.tagName.toLowerCase() === "polyline";
    if (!(line ? (b.width > 0 || b.height > 0) : (b.width > 0 && b.height > 0))) { flat.push(name); }
  });
  var out = {errors: errors, count: boxes.length, empty: flat,
             lanes: Array.prototype.map.call(document.querySelectorAll("svg#timeline g.lane"), function (g) { return g.id; }),
             fetched: performance.getEntriesByType("resource").map(function (r) { return r.name; })};
  var pre = document.createElement("pre");
  pre.id = "probe";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>"""


def _open(page: str, tmp: Path) -> tuple[dict, str]:
    html = tmp / "report.html"
    html.write_text(page.replace("</body>", PROBE + "\n</body>"))
    p = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp / 'profile'}", "--dump-dom", html.as_uri()],
                       capture_output=True, text=True, timeout=120, check=False)
    m = re.search(r'<pre id="probe">(.*?)</pre>', p.stdout, re.S)
    assert m, f"the probe did not run: {p.stderr[-1500:]}"
    return json.loads(m.group(1).replace("&quot;", '"').replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")), p.stderr


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium here (Debian: apt-get install chromium): the browser check is skipped")
@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_every_example_lays_out_its_timeline_in_chromium(example, tmp_path):
    page = run_cli("analyze", str(example), "--format", "html").stdout.decode()
    got, stderr = _open(page, tmp_path)
    assert got["errors"] == [] and got["fetched"] == [], got
    assert got["count"] >= 5 and got["empty"] == [], got["empty"][:10]
    assert "lane-phases" in got["lanes"] and "lane-events" in got["lanes"]
    console = [ln for ln in stderr.splitlines() if "CONSOLE" in ln]
    assert console == [], console
