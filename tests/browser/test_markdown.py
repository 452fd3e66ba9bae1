"""Issue 29: assistant answers render as Markdown, safely, live and after a reload.

A second daphne server talks to a ScriptedModel over real HTTP (the
`scripted_site` fixture), so each test chooses exactly what "the model"
writes: hostile Markdown and HTML, every supported element, a stream that
stops mid-fence. The page renders with the vendored markdown-it (raw HTML
off) and DOMPurify (an allow-list), under the site's CSP.

Failure messages name elements, counts and sizes, never the answers' text.
"""
from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.scripted_model import cut, endless, pieces, text

from .helpers import make_person, send, sign_in, wait_for_reply, wait_until_connected
from .ui_helpers import DESKTOP, PHONE, axe_violations, context_at, describe, sideways_overflow

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LAST_BODY = ".message-assistant:last-child .message-body"

CODE_LINES = [
    "def reverse(items):",
    "    # a comment with <b>tags</b> & ampersands",
    '    return items[::-1]  # ' + "x" * 180,
]
BENIGN = "\n".join([
    "# Reversing a list",
    "",
    "Use *slicing* or **reversed()**, with `items[::-1]`. See "
    "[the docs](https://docs.python.org/3/tutorial/datastructures.html) or mail help@example.com.",
    "",
    "- first point",
    "- second point",
    "  1. nested one",
    "  2. nested two",
    "",
    "3. three",
    "4. four",
    "",
    "> A quoted line",
    "",
    "## Compared",
    "",
    "| Way | Copies | Speed |",
    "|:----|:------:|------:|",
    "| slicing | yes | fast |",
    "| reversed | no | lazy |",
    "",
    "```python",
    *CODE_LINES,
    "```",
    "",
    "~~old~~ done.",
])

HOSTILE = "\n".join([
    "Hello <script>window.__owned = 'script'</script> there.",
    "",
    '<img src="x" onerror="window.__owned = \'img\'">',
    "",
    '<a href="#" onclick="window.__owned = \'click\'">click me</a>',
    "",
    "<style>body { display: none }</style>",
    "",
    '<iframe src="https://attacker.example/"></iframe>',
    "",
    "[js link](javascript:window.__owned='js') and [data link](data:text/html;base64,PHNjcmlwdD4=) "
    "and [vb](vbscript:msgbox) and <javascript:alert(1)>",
    "",
    "![tracker](https://attacker.example/pixel.png)",
    "",
    '[titled](https://example.com/ "a title" onmouseover="x")',
    "",
    "```html",
    '<script>window.__owned = "fenced"</script>',
    '<img src=x onerror=alert(1)>',
    "```",
    "",
    "<details open><summary>raw</summary><svg onload=alert(1)></svg></details>",
])

# Observes the page only: dialogs, and any attribute or element a payload could add.
OWNED = "() => window.__owned || null"
UNSAFE_NODES = """(selector) => {
  const body = document.querySelector(selector);
  const found = [];
  for (const node of body.querySelectorAll('*')) {
    const tag = node.tagName.toLowerCase();
    if (['script', 'style', 'iframe', 'img', 'svg', 'object', 'embed', 'form', 'input', 'details', 'link',
         'meta', 'base'].includes(tag)) found.push(tag);
    for (const attribute of node.attributes) {
      if (/^on/i.test(attribute.name) || attribute.name === 'style' || attribute.name === 'src') {
        found.push(tag + '[' + attribute.name + ']');
      }
      if (attribute.name === 'href' && !/^(https?:|mailto:)/i.test(attribute.value)) found.push(tag + '[href scheme]');
    }
  }
  return found;
}"""


def chat_page(scripted_context, username: str, *, size=DESKTOP, **options):
    make_person(username, f"pw-{username}-123")
    page = context_at(scripted_context, size, **options).new_page()
    sign_in(page, username, f"pw-{username}-123")
    wait_until_connected(page)
    return page


def watch_page(page, origin: str):
    """Collect CSP complaints, dialogs and requests to anywhere but the site itself."""
    seen = {"csp": [], "dialogs": [], "foreign": []}
    page.on("console", lambda message: seen["csp"].append(message.type)
            if "Content Security Policy" in message.text else None)
    page.on("dialog", lambda dialog: (seen["dialogs"].append(dialog.type), dialog.dismiss()))
    page.on("request", lambda request: seen["foreign"].append(request.url.split("/")[2])
            if not request.url.startswith(origin) else None)
    return seen


def test_hostile_markdown_and_html_never_run_nor_escape_the_message(scripted_context, scripted_site):
    server, model = scripted_site
    page = chat_page(scripted_context, "mallory")
    seen = watch_page(page, server.url)

    model.push(text(HOSTILE))
    send(page, "Show me something")
    reply = wait_for_reply(page)
    body = reply.locator(".message-body")
    expect(body).to_contain_text("click me")

    assert page.evaluate(UNSAFE_NODES, LAST_BODY) == []
    assert page.evaluate(OWNED) is None
    # Raw HTML is shown as text, and HTML inside a code block stays code.
    expect(body).to_contain_text("<script>window.__owned = 'script'</script>")
    code = body.locator("pre code")
    expect(code).to_have_count(1)
    assert '<script>window.__owned = "fenced"</script>' in code.inner_text()
    # Only http(s) links survive (an image becomes a link to it, never a
    # request), with rel and a new tab; the other schemes stay text.
    links = body.locator("a")
    expect(links).to_have_count(3)
    assert sorted(links.evaluate_all("nodes => nodes.map(node => node.getAttribute('href'))")) == [
        "https://attacker.example/", "https://attacker.example/pixel.png", "https://example.com/"]
    assert set(links.evaluate_all("nodes => nodes.map(node => node.rel + '|' + node.target)")) == {
        "noopener noreferrer|_blank"}
    expect(body).to_contain_text("[js link](javascript:")
    expect(body).to_contain_text("[data link](data:text/html")
    # Clicking what looks like a link runs nothing.
    body.get_by_text("click me").click()
    page.wait_for_timeout(200)

    assert page.evaluate(OWNED) is None
    assert seen == {"csp": [], "dialogs": [], "foreign": []}
    assert page.evaluate("getComputedStyle(document.body).display") != "none"

    # After a reload the stored answer renders the same way, and as safely.
    live_html = body.inner_html()
    page.reload()
    wait_until_connected(page)
    expect(page.locator(".message-assistant")).to_have_count(1)
    assert page.locator(LAST_BODY).inner_html() == live_html
    assert page.evaluate(UNSAFE_NODES, LAST_BODY) == []
    assert seen == {"csp": [], "dialogs": [], "foreign": []}


def test_deep_nesting_and_a_5000_line_code_block_stay_inside_their_message(scripted_context, scripted_site):
    server, model = scripted_site
    page = chat_page(scripted_context, "nina")
    seen = watch_page(page, server.url)

    deep = "".join("  " * level + f"- level {level}\n" for level in range(300))
    quotes = ">" * 400 + " the bottom of the well"
    emphasis = "*" * 200 + "stars" + "*" * 200
    lines = [f"line {number}: " + "value = compute(x) " * (4 if number % 100 else 30) for number in range(5000)]
    parts = ["Here it is:\n\n", "```text\n"] + [line + "\n" for line in lines] + ["```\n", "\nEnd of the listing."]
    page.evaluate("""() => {
      window.__longest = 0;
      new PerformanceObserver(list => list.getEntries().forEach(entry => {
        window.__longest = Math.max(window.__longest, entry.duration);
      })).observe({type: 'longtask', buffered: false});
    }""")
    model.push(text(deep), text(quotes + "\n\n" + emphasis), pieces(parts))

    for question, count in (("Nest lists", 1), ("Nest quotes", 2), ("A long listing", 3)):
        send(page, question)
        expect(page.locator(".message-assistant")).to_have_count(count)
        # Half a megabyte streamed and rendered: on a busy 2-core machine that takes longer than 5 s.
        reply = wait_for_reply(page, timeout=30_000)
        expect(reply.locator(".message-body")).not_to_be_empty()
        # The message box holds its content: nothing wider than the bubble,
        # nothing past the list of messages, and the page never scrolls sideways.
        fits = page.evaluate("""() => {
          const item = document.querySelector('.message-assistant:last-child');
          const list = document.getElementById('messages').getBoundingClientRect();
          const box = item.getBoundingClientRect();
          return {inside: box.left >= list.left - 1 && box.right <= list.right + 1,
                  overflow: item.scrollWidth - item.clientWidth};
        }""")
        assert fits == {"inside": True, "overflow": 0}, f"{question}: {fits}"
        assert sideways_overflow(page) <= 0

    first, second, listing = (page.locator(".message-assistant").nth(index).locator(".message-body")
                              for index in range(3))
    # Nothing that arrived is lost: too deep for Markdown shows as plain text, whole.
    assert "level 299" in first.inner_text()
    assert "the bottom of the well" in second.inner_text()
    code = listing.locator("pre")
    expect(code).to_have_count(1)
    assert code.evaluate("node => node.textContent.split('\\n').length") == 5001
    assert code.evaluate("node => node.scrollHeight > node.clientHeight && node.scrollWidth > node.clientWidth")
    expect(listing).to_contain_text("End of the listing.")
    # The page answers while and after rendering it.
    longest = page.evaluate("window.__longest")
    assert longest < 1000, f"the page was busy for {longest:.0f} ms at a stretch"
    page.locator("#message").fill("still typing")
    expect(page.locator("#message")).to_have_value("still typing")
    assert seen == {"csp": [], "dialogs": [], "foreign": []}


def check_benign(body) -> None:
    """Every supported element, where it belongs."""
    expect(body.locator("h2")).to_have_text(["Reversing a list"])
    expect(body.locator("h3")).to_have_text(["Compared"])
    expect(body.locator("em")).to_have_text(["slicing"])
    expect(body.locator("strong")).to_have_text(["reversed()"])
    expect(body.locator("p > code")).to_have_text(["items[::-1]"])
    expect(body.locator("s")).to_have_text(["old"])
    links = body.locator("a")
    expect(links).to_have_count(2)
    assert links.nth(0).get_attribute("href") == "https://docs.python.org/3/tutorial/datastructures.html"
    assert links.nth(1).get_attribute("href") == "mailto:help@example.com"
    for index in range(2):
        assert links.nth(index).get_attribute("rel") == "noopener noreferrer"
    expect(body.locator("ul > li")).to_have_count(2)
    expect(body.locator("ul ol > li")).to_have_text(["nested one", "nested two"])
    assert body.locator("ol[start='3'] > li").count() == 2
    expect(body.locator("blockquote")).to_have_text("A quoted line")
    expect(body.locator("table th")).to_have_text(["Way", "Copies", "Speed"])
    expect(body.locator("table td")).to_have_count(6)
    assert body.locator("td.align-center").count() == 2 and body.locator("th.align-right").count() == 1
    block = body.locator(".code-block")
    expect(block.locator(".code-lang")).to_have_text("python")
    expect(block.get_by_role("button", name="Copy python code")).to_be_visible()
    assert block.locator("pre").evaluate("node => node.textContent") == "\n".join(CODE_LINES) + "\n"


@pytest.mark.parametrize("size", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_each_supported_element_renders_live_and_after_a_reload(scripted_context, scripted_site, size):
    _server, model = scripted_site
    page = chat_page(scripted_context, "ben", size=size)
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])

    model.push(text(BENIGN))
    send(page, "How do I reverse a list in Python? **not bold** <b>mine</b>")
    # The person's own message stays plain text.
    mine = page.locator(".message-user .message-body")
    expect(mine).to_have_text("How do I reverse a list in Python? **not bold** <b>mine</b>")
    expect(mine.locator("*")).to_have_count(0)

    body = wait_for_reply(page).locator(".message-body")
    check_benign(body)
    # A long code line scrolls inside its block; the page does not scroll sideways.
    pre = body.locator("pre")
    assert pre.evaluate("node => node.scrollWidth > node.clientWidth")
    assert sideways_overflow(page) <= 0

    # Copy puts the block's exact text on the clipboard.
    copy = body.locator(".code-copy")  # its name turns to "Copied python code" for two seconds
    copy.click()
    expect(copy).to_contain_text("Copied")
    assert page.evaluate("navigator.clipboard.readText()") == "\n".join(CODE_LINES)

    live_html = body.inner_html()
    page.reload()
    wait_until_connected(page)
    body = page.locator(LAST_BODY)
    expect(body.locator(".code-block")).to_have_count(1)
    check_benign(body)
    assert body.inner_html() == live_html.replace("Copied", "Copy")
    assert sideways_overflow(page) <= 0
    expect(page.locator(".message-user .message-body")).to_have_text(re.compile(r"\*\*not bold\*\* <b>mine</b>$"))


# Records the newest bubble after every change: its text length, whether it
# shows a code block, whether it is still pending, and its height.
RECORD_RENDERS = """() => {
  window.__renders = [];
  new MutationObserver(() => {
    const item = document.querySelector('.message-assistant:last-child');
    if (!item) return;
    const body = item.querySelector('.message-body');
    window.__renders.push({length: body.textContent.length, code: !!body.querySelector('.code-block pre'),
                           pending: item.classList.contains('pending'), height: body.getBoundingClientRect().height});
  }).observe(document.getElementById('messages'), {subtree: true, childList: true, characterData: true});
}"""


def test_an_answer_renders_as_it_streams_and_an_open_fence_is_code(scripted_context, scripted_site):
    _server, model = scripted_site
    page = chat_page(scripted_context, "carl")
    page.evaluate(RECORD_RENDERS)
    model.push(pieces(["Here", " is **the", " code**:\n\n", "```python\n", "total = 0\n", "for n in range(3):\n",
                       "    total += n\n", "print(total)\n", "```\n\n", "That", " prints 3."], delay=0.25))
    send(page, "Sum some numbers")

    # While it streams, the unfinished fence already shows as code.
    streaming = page.locator(".message-assistant.pending .code-block pre")
    expect(streaming).to_contain_text("total = 0")
    expect(page.locator(".message-assistant.pending strong")).to_have_text("the code")
    body = wait_for_reply(page).locator(".message-body")
    expect(body.locator("pre")).to_have_text(re.compile(r"print\(total\)"))
    expect(body.locator("p").last).to_have_text("That prints 3.")

    renders = [step for step in page.evaluate("window.__renders") if step["pending"]]
    shown = [step for step in renders if step["length"]]
    assert len(shown) >= 4, "the answer renders in several steps while it streams"
    assert any(step["code"] for step in shown), "the open fence rendered as code while streaming"
    # No flicker and no jumps back: once shown, the bubble never empties or shrinks.
    assert all(step["length"] for step in renders[renders.index(shown[0]):])
    heights = [step["height"] for step in shown]
    assert heights == sorted(heights), "the bubble never got shorter while streaming"


def test_stopped_cut_off_and_failed_answers_render_what_arrived(scripted_context, scripted_site):
    _server, model = scripted_site
    page = chat_page(scripted_context, "dora")

    model.push(text("## Partial\n\nA **bold** start and `code`", finish_reason="length"))
    send(page, "Long answer please")
    body = wait_for_reply(page).locator(".message-body")
    expect(body.locator("h2")).to_have_text("Partial")
    expect(body.locator("strong")).to_have_text("bold")
    expect(page.locator(".message-assistant:last-child .error")).to_contain_text("cut off")

    model.push(cut("- one\n- two\n- **three** and mo"))
    send(page, "A list that breaks")
    expect(page.locator(".message-assistant")).to_have_count(2)
    failed = wait_for_reply(page)
    expect(failed).to_have_class(re.compile(r"\bfailed\b"))
    expect(failed.locator(".message-body li")).to_have_count(3)
    expect(failed.locator(".message-body strong")).to_have_text("three")

    model.push(endless(delay=0.05))
    send(page, "Never stop")
    expect(page.locator(".message-assistant")).to_have_count(3)
    expect(page.locator(".message-assistant.pending .message-body p")).to_contain_text("w3")
    page.locator("#stop").click()
    stopped = wait_for_reply(page)
    expect(stopped.locator(".message-body p")).to_contain_text("w1 w2 w3")


@pytest.mark.parametrize("size", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_a_chat_with_a_rendered_answer_has_no_axe_violations(scripted_context, scripted_site, size):
    _server, model = scripted_site
    page = chat_page(scripted_context, "erin", size=size, bypass_csp=True)
    model.push(text(BENIGN))
    send(page, "How do I reverse a list in Python?")
    check_benign(wait_for_reply(page).locator(".message-body"))
    page.locator("#message").blur()
    violations = axe_violations(page)
    assert violations == [], f"axe-core found violations on a rendered answer: {describe(violations)}"
