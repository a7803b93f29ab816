#!/usr/bin/env python3
"""Checks what headless Chromium made of a kvplan report (tests/report/browser_test.sh).

  check_rendered_report.py SCREENSHOT.png DOM.html CHROMIUM_LOG... --charts N --width W --height H

Fails (exit 1, one line per problem) when the page logged anything to the console (the report has
no scripts, so any console line is an error: a script error, a resource that failed to load, a CSP
refusal), when the screenshot is not a W x H PNG with real content (at least a few dozen distinct
colours, most of the page not one colour), or when the rendered DOM does not hold N chart <svg>
elements, each with a size and at least 20 drawing elements.
"""
import argparse
import re
import struct
import sys
import zlib


def png_pixels(path):
    """Decodes an 8-bit RGB/RGBA non-interlaced PNG (what Chromium writes) with the stdlib only."""
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path}: not a PNG")
    pos, idat, width, height, channels = 8, b"", 0, 0, 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
            if depth != 8 or colour not in (2, 6) or interlace:
                raise ValueError(f"{path}: unsupported PNG (depth {depth}, colour type {colour})")
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
    raw = zlib.decompress(idat)
    stride = width * channels
    rows, previous = [], bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        if kind == 1:
            for i in range(channels, stride):
                line[i] = (line[i] + line[i - channels]) & 0xFF
        elif kind == 2:
            line = bytearray((a + b) & 0xFF for a, b in zip(line, previous))
        elif kind == 3:
            for i in range(stride):
                left = line[i - channels] if i >= channels else 0
                line[i] = (line[i] + ((left + previous[i]) >> 1)) & 0xFF
        elif kind == 4:
            for i in range(stride):
                a = line[i - channels] if i >= channels else 0
                b, c = previous[i], previous[i - channels] if i >= channels else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[i] = (line[i] + pred) & 0xFF
        elif kind != 0:
            raise ValueError(f"{path}: bad filter {kind} on row {y}")
        rows.append(bytes(line))
        previous = line
    return width, height, channels, rows


def check_screenshot(path, width, height, problems):
    try:
        w, h, channels, rows = png_pixels(path)
    except (OSError, ValueError, zlib.error) as e:
        problems.append(f"screenshot: {e}")
        return
    if (w, h) != (width, height):
        problems.append(f"screenshot: {w}x{h}, expected {width}x{height}")
    counts = {}
    for row in rows[::4]:  # every 4th row and pixel is plenty to tell a page from a blank one
        for x in range(0, len(row), 4 * channels):
            px = row[x:x + 3]
            counts[px] = counts.get(px, 0) + 1
    total = sum(counts.values())
    top = max(counts.values()) if counts else 0
    if len(counts) < 32:
        problems.append(f"screenshot: only {len(counts)} distinct colours: a blank or broken page")
    elif top > 0.97 * total:
        problems.append(f"screenshot: {100 * top / total:.1f} % of the page is one colour")
    print(f"screenshot {w}x{h}: {len(counts)} distinct colours (sampled), "
          f"most common {100 * top / total:.1f} %")


def check_dom(path, charts, problems):
    dom = open(path, encoding="utf-8", errors="replace").read()
    if "</html>" not in dom:
        problems.append("dom: Chromium dumped no complete document")
    svgs = re.findall(r"<svg\b([^>]*)>(.*?)</svg>", dom, flags=re.S)
    chart_svgs = [(a, body) for a, body in svgs if 'class="chart"' in a]
    if len(chart_svgs) != charts:
        problems.append(f"dom: {len(chart_svgs)} chart <svg> elements, expected {charts}")
    for attrs, body in chart_svgs:
        name = re.search(r'id="([^"]*)"', attrs)
        name = name.group(1) if name else "?"
        w = re.search(r'width="(\d+)"', attrs)
        h = re.search(r'height="(\d+)"', attrs)
        if not w or not h or int(w.group(1)) <= 0 or int(h.group(1)) <= 0:
            problems.append(f"dom: chart {name} has no positive width and height")
        drawn = len(re.findall(r"<(polyline|polygon|path|rect|line|circle|text)\b", body))
        if drawn < 20:
            problems.append(f"dom: chart {name} has {drawn} drawing elements, expected >= 20")
        print(f"chart {name}: {drawn} drawing elements")
    if re.search(r"<script\b", dom):
        problems.append("dom: the report holds a <script>")
    if re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", dom):
        problems.append("dom: the report references a remote resource")


def check_console(logs, problems):
    for log in logs:
        for line in open(log, encoding="utf-8", errors="replace"):
            if re.search(r":CONSOLE[:(]", line) or "Uncaught" in line:
                problems.append("console: " + line.strip())


def main():
    p = argparse.ArgumentParser()
    p.add_argument("screenshot")
    p.add_argument("dom")
    p.add_argument("logs", nargs="+")
    p.add_argument("--charts", type=int, required=True)
    p.add_argument("--width", type=int, required=True)
    p.add_argument("--height", type=int, required=True)
    a = p.parse_args()
    problems = []
    check_console(a.logs, problems)
    check_dom(a.dom, a.charts, problems)
    check_screenshot(a.screenshot, a.width, a.height, problems)
    for problem in problems:
        print("FAIL " + problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
