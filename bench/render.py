"""Markdown rendering bench: what does rendering an answer cost the chat page?

It owns one question. The chat renders each assistant answer in the browser
(static/chat/markdown.js: markdown-it, then DOMPurify, then the code-block
decorations), once per streamed frame while the answer arrives. The bench
loads the very files the page loads into Chromium (/usr/bin/chromium, a
blank page, no server) and times, in the page:

- `render()` of a typical chat answer (headings, lists, a table, two code
  blocks: about 2 KB), of a 5,000-line code block (about 300 KB), and of a
  list nested 300 levels deep (shown as plain text);
- a stream: the typical answer arriving word by word and the long block
  line by line, 2 ms apart, through `live()` (the page's streaming renderer),
  with the number of renders it made, the whole stream's time, the final
  render and the longest task; and the same stream written as plain text
  (what the page did before Markdown), the floor.

Run: `.venv/bin/python bench/render.py [--rounds N]`. Synthetic text only.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = Path("/usr/bin/chromium")
SCRIPTS = [
    ROOT / "static" / "vendor" / "markdown-it" / "markdown-it.min.js",
    ROOT / "static" / "vendor" / "dompurify" / "purify.min.js",
    ROOT / "static" / "chat" / "markdown.js",
]

TYPICAL = "\n".join([
    "# Reversing a list in Python",
    "",
    "There are **three** common ways, each with a *different* trade-off. See "
    "[the tutorial](https://docs.python.org/3/tutorial/datastructures.html).",
    "",
    "1. Slicing: `items[::-1]` returns a new list.",
    "2. `reversed(items)` returns an iterator.",
    "3. `items.reverse()` reverses in place.",
    "",
    "```python",
    *[f"def example_{n}(items):\n    return items[::-1]  # variant {n}" for n in range(12)],
    "```",
    "",
    "| Way | New list | Lazy |",
    "|-----|:--------:|-----:|",
    *[f"| way {n} | yes | no |" for n in range(8)],
    "",
    "> Note: slicing copies the list.",
    "",
    "- a point",
    "  - a nested point",
    "- another point",
    "",
    "```bash",
    "python -m timeit -s 'x = list(range(1000))' 'x[::-1]'",
    "```",
    "",
    "That is all.",
])
LONG_LINES = [f"line {n}: value = compute(x) + compute(y) - offset[{n}]" for n in range(5000)]
LONG = "Here it is:\n\n```text\n" + "\n".join(LONG_LINES) + "\n```\n\nEnd."
DEEP = "".join("  " * level + f"- level {level}\n" for level in range(300))

TIME_RENDER = """([text, rounds]) => {
  const box = document.getElementById('out');
  const times = [];
  for (let i = 0; i < rounds; i++) {
    const started = performance.now();
    box.replaceChildren(ChatMarkdown.render(text));
    box.getBoundingClientRect();  // include layout
    times.push(performance.now() - started);
  }
  return times;
}"""

STREAM = """([parts, gapMs, plain]) => new Promise(resolve => {
  const box = document.getElementById('out');
  box.replaceChildren();
  let renders = 0, longest = 0;
  const observer = new MutationObserver(() => { renders += 1; });
  observer.observe(box, {childList: true});
  const live = plain
    ? {set: value => { box.textContent = value; }, finish: value => { box.textContent = value; }}
    : ChatMarkdown.live(box, () => {});
  let text = '', index = 0, lastDelta = 0;
  const started = performance.now();
  function next() {
    if (index >= parts.length) {
      lastDelta = performance.now();
      const finishStarted = performance.now();
      live.finish(text);
      const finishMs = performance.now() - finishStarted;
      observer.disconnect();
      resolve({renders, finishMs, totalMs: performance.now() - started,
               chars: text.length, deltas: parts.length});
      return;
    }
    text += parts[index++];
    live.set(text);
    setTimeout(next, gapMs);
  }
  next();
})"""

LONGEST_TASK = """() => new Promise(resolve => {
  window.__tasks = [];
  new PerformanceObserver(list => list.getEntries().forEach(e => window.__tasks.push(e.duration)))
    .observe({type: 'longtask', buffered: false});
  resolve(true);
})"""


def ms(values: list[float]) -> str:
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return f"median {statistics.median(ordered):7.2f} ms   p99 {p99:7.2f} ms   (n={len(ordered)})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--smoke", action="store_true", help="CI's smoke run: a few renders, a second or two, to prove the bench still runs; no figure is judged"
                             " (one round, the long block streamed as its first 100 lines)")
    args = parser.parse_args()
    stream_lines = LONG_LINES
    if args.smoke:
        args.rounds, stream_lines = 1, LONG_LINES[:100]
    if not CHROMIUM.exists():
        print("bench/render.py needs Debian's Chromium at /usr/bin/chromium (apt-get install -y chromium).")
        return 1
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as folder:
        page_path = Path(folder) / "render.html"
        tags = "\n".join(f'<script src="file://{path}"></script>' for path in SCRIPTS)
        page_path.write_text(f"<!doctype html><html><body><div id='out'></div>{tags}</body></html>")
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=str(CHROMIUM), args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"])
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            page.goto(page_path.as_uri())
            assert page.evaluate("typeof ChatMarkdown === 'object'"), "markdown.js did not load"
            print(f"Chromium {browser.version}; markdown-it 15.0.3, DOMPurify 3.5.0; {args.rounds} rounds each")
            print()
            print("render() of a whole answer, with layout:")
            for label, text, rounds in (("typical answer (%d chars)" % len(TYPICAL), TYPICAL, args.rounds),
                                        ("5,000-line code block (%d chars)" % len(LONG), LONG, max(5, args.rounds // 3)),
                                        ("list nested 300 deep (plain text)", DEEP, args.rounds)):
                page.evaluate(TIME_RENDER, [text, 3])  # warm up
                print(f"  {label:<40} {ms(page.evaluate(TIME_RENDER, [text, rounds]))}")
            print()
            print("streaming through live(), a delta every 2 ms:")
            words = [piece for piece in TYPICAL.replace("\n", "\n ").split(" ")]
            typical_parts = [word + " " for word in words]
            long_parts = ["Here it is:\n\n", "```text\n", *[line + "\n" for line in stream_lines], "```\n", "\nEnd."]
            for label, parts, plain in (("typical answer, word by word", typical_parts, False),
                                        ("  the same as plain text", typical_parts, True),
                                        ("5,000-line block, line by line", long_parts, False),
                                        ("  the same as plain text", long_parts, True)):
                page.evaluate(LONGEST_TASK)
                result = page.evaluate(STREAM, [parts, 2, plain])
                tasks = page.evaluate("window.__tasks")
                longest = max(tasks) if tasks else 0.0
                print(f"  {label:<34} {result['deltas']:5d} deltas -> {result['renders']:4d} renders in "
                      f"{result['totalMs'] / 1000:5.1f} s; final render {result['finishMs']:6.1f} ms; "
                      f"longest task {longest:6.1f} ms ({len(tasks)} over 50 ms)")
            browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
