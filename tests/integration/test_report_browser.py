"""The HTML report in a real browser: headless Chromium (Debian's ``/usr/bin/chromium``) renders
the page, takes a screenshot of the first screen (1280x800), and a probe script (added to a copy
of the page: the report itself has no scripts) measures where the mapping table ends and what
colours its statuses have. The mapping must be whole on the first screen, in colour, with one row
per entry. The screenshot is kept (``$REBASECTL_ARTIFACTS`` when set) for a person to look at.

Skipped without Chromium, unless ``REBASECTL_REQUIRE_BROWSER=1`` (CI sets it) makes that a
failure. The synthetic pair always runs; the example bump's real pair when the mirror is set.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import struct
import subprocess
import zlib
from pathlib import Path
from typing import Any

import pytest

from rebasectl.report import render_html
from tests.harness.cli import run as rebasectl
from tests.unit.report_pair import build_pair

CHROMIUM = Path("/usr/bin/chromium")
WIDTH, HEIGHT = 1280, 800
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run",
         "--hide-scrollbars", f"--window-size={WIDTH},{HEIGHT}")
PROBE = """<script>
const table = document.getElementById('mapping').nextElementSibling;
const box = table.getBoundingClientRect();
const colours = [...table.querySelectorAll('.st')].map(e => getComputedStyle(e).backgroundColor);
document.body.setAttribute('data-probe', JSON.stringify({bottom: box.bottom, top: box.top,
  width: window.innerWidth, rows: table.rows.length, colours: [...new Set(colours)]}));
</script>"""
MODIFIED = (0xFF, 0xF1, 0xC2)  # .st-modified background in html.CSS


def _browser() -> Path:
    if CHROMIUM.exists():
        return CHROMIUM
    if os.environ.get("REBASECTL_REQUIRE_BROWSER"):
        pytest.fail(f"{CHROMIUM} not found (apt-get install -y chromium)")
    pytest.skip(f"{CHROMIUM} not found (apt-get install -y chromium)")


def _run(tmp: Path, *args: str) -> str:
    profile = tmp / f"profile-{len(list(tmp.glob('profile-*')))}"
    proc = subprocess.run([str(_browser()), *FLAGS, f"--user-data-dir={profile}", *args],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def png_rgb(data: bytes) -> tuple[int, int, list[bytes], int]:
    """Width, height, unfiltered rows and bytes per pixel of an 8-bit RGB(A) PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, head = 8, b"", b""
    while pos < len(data):
        size, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + size]
        head = body if kind == b"IHDR" else head
        idat += body if kind == b"IDAT" else b""
        pos += 12 + size
    width, height, depth, colour = struct.unpack(">IIBB", head[:10])
    assert depth == 8 and colour in (2, 6), (depth, colour)
    bpp = 3 if colour == 2 else 4
    raw, stride, rows, prev = zlib.decompress(idat), width * bpp, [], bytes(width * bpp)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        for i in range(stride):
            a, b = line[i - bpp] if i >= bpp else 0, prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            p = a + b - c
            pred = [0, a, b, (a + b) // 2,
                    a if abs(p - a) <= abs(p - b) and abs(p - a) <= abs(p - c)
                    else b if abs(p - b) <= abs(p - c) else c][kind]
            line[i] = (line[i] + pred) & 0xFF
        rows.append(bytes(line))
        prev = bytes(line)
    return width, height, rows, bpp


def _check(page: str, tmp: Path, name: str, entries: int) -> dict[str, Any]:
    (tmp / "report.html").write_text(page)
    (tmp / "probe.html").write_text(page.replace("</body>", PROBE + "</body>"))
    shot = Path(os.environ.get("REBASECTL_ARTIFACTS", tmp)) / f"{name}-first-screen.png"
    shot.parent.mkdir(parents=True, exist_ok=True)
    _run(tmp, f"--screenshot={shot}", (tmp / "report.html").as_uri())
    dom = _run(tmp, "--dump-dom", (tmp / "probe.html").as_uri())
    m = re.search(r'data-probe="([^"]*)"', dom)
    assert m, dom[:500]
    probe: dict[str, Any] = json.loads(html.unescape(m.group(1)))
    assert probe["rows"] == entries + 1  # one row per entry, and the head
    # the probe's page has the screenshot's width, so the same layout: the mapping is whole on
    # the first screen of the screenshot
    assert probe["width"] == WIDTH, probe
    assert 0 < probe["top"] < probe["bottom"] <= HEIGHT, probe
    assert len(probe["colours"]) >= 3, probe  # coloured statuses
    width, height, rows, bpp = png_rgb(shot.read_bytes())
    assert (width, height) == (WIDTH, HEIGHT)
    top = rows[:int(probe["bottom"])]
    hits = sum(row[i:i + 3] == bytes(MODIFIED) for row in top for i in range(0, len(row), bpp))
    assert hits > 50, "no modified badge drawn on the first screen"
    return probe


def test_synthetic_pair_in_chromium(tmp_path: Path) -> None:
    _browser()
    report = build_pair(tmp_path)
    page = render_html(report)
    assert page.count("href=\"#mapping\"") == len(report.mapping) + 1  # the way back
    _check(page, tmp_path, "synthetic", len(report.mapping))


def test_example_pair_in_chromium(tmp_path: Path) -> None:
    from tests.conftest import real_mirror

    mirror = real_mirror()
    _browser()
    ws = tmp_path / "ws"
    ws.mkdir()
    r = rebasectl(ws, "report", "--repo", str(mirror), "--old-range", "3714d81..miles-20260218",
                  "--new-range", "1dcf0da..upstream/1dcf0dafa", "--format", "html")
    assert r.returncode == 1, r.stderr  # entries to review: exit 1, the page written
    _check(r.stdout, tmp_path, "example", 10)
    shutil.rmtree(tmp_path / "ws", ignore_errors=True)


LINK_PROBE = """<script>
const table = document.getElementById('mapping').nextElementSibling;
const review = [...table.rows].slice(1).map(r => r.cells[4].textContent.trim());
const links = [...document.querySelectorAll('a[href^="http"]')].map(a => a.href);
document.body.setAttribute('data-probe', JSON.stringify({review: review, links: links,
  text: document.body.innerText}));
</script>"""
UPSTREAM_WEB = "https://github.com/NVIDIA/Megatron-LM"
FORK_WEB = "https://github.com/radixark/Megatron-LM"


def test_links_and_review_first_in_chromium(tmp_path: Path) -> None:
    """With series.yaml's web keys: upstream commits link to the upstream's commit pages,
    ``#N`` of an upstream subject to the upstream's pull request, ``#N`` of a patch's subject to
    the fork's; the rows to review come first; the page gives no command-line advice."""
    from dataclasses import replace

    from rebasectl.report.model import Links

    _browser()
    report = replace(build_pair(tmp_path), links=Links(UPSTREAM_WEB, FORK_WEB))
    page = render_html(report)
    (tmp_path / "probe.html").write_text(page.replace("</body>", LINK_PROBE + "</body>"))
    dom = _run(tmp_path, "--dump-dom", (tmp_path / "probe.html").as_uri())
    m = re.search(r'data-probe="([^"]*)"', dom)
    assert m, dom[:500]
    probe: dict[str, Any] = json.loads(html.unescape(m.group(1)))
    review = probe["review"]
    assert review == sorted(review, key=lambda x: x != "yes") and "no" in review, review
    assert review.count("yes") == len(report.to_review)
    links = set(probe["links"])
    forced = report.mapping[1].upstream_commits[0]
    assert f"{UPSTREAM_WEB}/commit/{forced.commit}" in links
    assert f"{UPSTREAM_WEB}/pull/11" in links  # "upstream: faster transform (#11)"
    assert f"{FORK_WEB}/pull/2" in links  # "[2/5] feat: clamp the transform (#2)"
    assert not any(x.startswith(f"{FORK_WEB}/commit/") for x in links)  # patch shas: no link
    assert "--verbose" not in probe["text"] and "--format" not in probe["text"]


def test_link_targets_escaped() -> None:
    """Every link target is escaped: a web URL carrying markup cannot leave its attribute."""
    from rebasectl.report.html import _Page
    from rebasectl.report.view import Span

    page = _Page('https://x.org/"><b>', 'https://y.org/a&b')
    drawn = page.span(Span("abc", "commit", "abc123")) + \
        page.span(Span('fix (#7) <i>', "fork-text"))
    assert '<b>' not in drawn and "&quot;&gt;&lt;b&gt;" in drawn
    assert 'href="https://y.org/a&amp;b/pull/7"' in drawn and "&lt;i&gt;" in drawn
