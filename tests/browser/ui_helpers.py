"""Sizes, axe-core, layout and colour checks for the page tests (issue 12).

axe-core 4.14.1 is vendored under tests/browser/vendor/axe-core/ (from the
npm registry: `npm pack axe-core@4`, MIT/MPL-2.0, see its LICENSE) and
evaluated in the page through DevTools (`page.evaluate` of its source), which
the site's Content-Security-Policy does not govern: a page is checked with its
CSP on, as people get it.

Failure messages name rules, selectors and numbers only, never page text, so
no memory content reaches test output.
"""
from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path

from playwright.sync_api import Page

AXE = Path(__file__).parent / "vendor" / "axe-core" / "axe.min.js"

DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
PHONES = [{"width": 360, "height": 740}, PHONE, {"width": 414, "height": 896}]
SIZES = {"desktop": DESKTOP, "phone": PHONE}


def context_at(new_context, size: dict, **options):
    """A browser context at a viewport size; phones get a touch screen and a phone's scale."""
    if size["width"] < 600:
        options = {"is_mobile": True, "has_touch": True, "device_scale_factor": 2, **options}
    return new_context(viewport=size, **options)


def _axe_source() -> str:
    # An expression that defines window.axe and yields nothing Playwright must serialise.
    return AXE.read_text(encoding="utf-8") + "\n;void 0;"


def axe_violations(page: Page, *, exclude: tuple[str, ...] = ()) -> list[dict]:
    """Run axe-core (all rules but the experimental ones) on the page; return its violations."""
    if not page.evaluate("typeof window.axe === 'object'"):
        page.evaluate(_axe_source())
    options = {"resultTypes": ["violations"]}
    context = {"exclude": [[selector] for selector in exclude]} if exclude else None
    result = page.evaluate(
        "([context, options]) => (context ? axe.run(context, options) : axe.run(document, options))"
        ".then(r => r.violations.map(v => ({id: v.id, impact: v.impact,"
        " targets: v.nodes.map(n => n.target.join(' '))})))",
        [context, options],
    )
    return result


def describe(violations: list[dict]) -> str:
    return json.dumps([{"rule": v["id"], "impact": v["impact"], "where": v["targets"][:5]} for v in violations])


def assert_no_axe_violations(page: Page, where: str) -> None:
    violations = axe_violations(page)
    assert violations == [], f"axe-core found violations on {where}: {describe(violations)}"


def sideways_overflow(page: Page) -> int:
    """How many CSS pixels the page is wider than the viewport (0: no sideways scrolling)."""
    return page.evaluate("document.scrollingElement.scrollWidth - window.innerWidth")


def wider_than_viewport(page: Page) -> list[str]:
    """Selectors of visible elements that stick out past the right edge (for failure messages)."""
    return page.evaluate("""() => {
      const out = [];
      for (const node of document.querySelectorAll('body *')) {
        const box = node.getBoundingClientRect();
        if (box.width && box.right > window.innerWidth + 1) {
          const classes = node.className && typeof node.className === 'string'
            ? '.' + node.className.split(' ').join('.') : '';
          out.push(node.tagName.toLowerCase() + (node.id ? '#' + node.id : '') + classes);
        }
      }
      return out.slice(0, 10);
    }""")


def in_viewport(page: Page, selector: str) -> bool:
    """True when the element's box is inside the viewport (and inside its scrolled list)."""
    return page.evaluate("""(selector) => {
      const node = document.querySelector(selector);
      if (!node) return false;
      const box = node.getBoundingClientRect();
      if (box.top < -1 || box.bottom > window.innerHeight + 1) return false;
      const list = node.closest('.messages');
      if (!list) return true;
      const frame = list.getBoundingClientRect();
      return box.bottom <= frame.bottom + 1 && box.top >= frame.top - 1;
    }""", selector)


# --- colours ---------------------------------------------------------------------


def _png_pixels(data: bytes) -> tuple[int, int, list[tuple[int, int, int]]]:
    """Decode an 8-bit RGB or RGBA, non-interlaced PNG (what Chromium's screenshots are)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    position, chunks, header = 8, [], None
    while position < len(data):
        length, kind = struct.unpack(">I4s", data[position:position + 8])
        body = data[position + 8:position + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            chunks.append(body)
        position += 12 + length
    width, height, depth, colour, _, _, interlace = header
    assert depth == 8 and colour in (2, 6) and interlace == 0, "unexpected PNG format"
    channels = 3 if colour == 2 else 4
    raw = zlib.decompress(b"".join(chunks))
    stride = width * channels
    pixels, previous, offset = [], bytearray(stride), 0
    for _ in range(height):
        kind = raw[offset]
        line = bytearray(raw[offset + 1:offset + 1 + stride])
        offset += 1 + stride
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up = previous[i]
            corner = previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                guess = left + up - corner
                pa, pb, pc = abs(guess - left), abs(guess - up), abs(guess - corner)
                line[i] = (line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 0xFF
        pixels.extend(tuple(line[i:i + 3]) for i in range(0, stride, channels))
        previous = line
    return width, height, pixels


def hue_name(rgb: tuple[int, int, int]) -> str:
    """"green", "amber", "red" or "grey" for a colour, as a person would name it."""
    red, green, blue = rgb
    top, bottom = max(rgb), min(rgb)
    if top - bottom < 40:
        return "grey"
    if green >= red and green > blue:
        return "green"
    if red > green and green >= 0.45 * red:
        return "amber"
    if red > green:
        return "red"
    return "other"


def dominant_hue(png: bytes) -> str:
    """The most frequent non-grey hue of a screenshot (the colour of a meter's bar)."""
    _, _, pixels = _png_pixels(png)
    counts: dict[str, int] = {}
    for pixel in pixels:
        name = hue_name(pixel)
        if name != "grey":
            counts[name] = counts.get(name, 0) + 1
    return max(counts, key=counts.get) if counts else "grey"


def css_hue(page: Page, selector: str) -> str:
    """The hue of an element's text colour."""
    value = page.evaluate("(s) => getComputedStyle(document.querySelector(s)).color", selector)
    numbers = [int(float(part)) for part in value[value.index("(") + 1:value.index(")")].split(",")[:3]]
    return hue_name(tuple(numbers))
