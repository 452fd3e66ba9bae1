// Assistant messages as Markdown, safe by construction.
//
// Models write Markdown; the chat shows it rendered. Three layers keep a
// model's (or an injected document's) words from becoming page code:
//
// 1. markdown-it (vendored, static/vendor/markdown-it) parses CommonMark plus
//    tables, strikethrough and bare links with `html: false`: raw HTML in an
//    answer is shown as text, never passed through. Links are kept only for
//    http:, https: and mailto: (validateLink); anything else stays text.
//    Images are off: a picture from anywhere would be a request the page
//    did not choose to make (and the CSP forbids it).
// 2. DOMPurify (vendored, static/vendor/dompurify) then sanitizes that HTML
//    against an allow-list of tags, attributes and URL schemes, and returns
//    a DOM fragment: nothing is assigned to innerHTML here.
// 3. What is added afterwards (the code block's label and Copy button, link
//    rel/target, table scrollers) is built with DOM calls and textContent.
//
// An answer nested deeper than MAX_NESTING (lists in lists, quotes in quotes)
// is shown as plain text: markdown-it would drop what lies past that depth.
// Headings are shifted under the page's own <h1> (a "#" heading becomes an
// <h2>) and never skip a level, so screen-reader outlines stay whole.
// The person's own messages, the memory page, History and the admin stay
// plain text: only assistant message bodies come through here.
(function () {
  "use strict";

  if (typeof window.markdownit !== "function" || typeof window.DOMPurify !== "function") return;

  // The words around a reply (Copy, a link's destination) come from the
  // JavaScript catalogue loaded before this script (config/urls.py); without it, English.
  const gettext = window.gettext || function (text) { return text; };
  const interpolate = window.interpolate || function (format, values) {
    return format.replace(/%\((\w+)\)s/g, function (match, name) { return String(values[name]); });
  };

  const SAFE_URL = /^(?:https?:|mailto:)/i;
  const SAFE_CLASS = /^(?:language-[A-Za-z0-9_+#.-]{1,40}|align-(?:left|right|center))$/;
  const TAGS = ["p", "br", "strong", "em", "s", "del", "code", "pre", "blockquote", "ul", "ol", "li",
    "h2", "h3", "h4", "h5", "h6", "hr", "table", "thead", "tbody", "tr", "th", "td", "a"];
  const ATTRIBUTES = ["href", "title", "start", "class"];

  // Past this depth markdown-it stops parsing (and drops the rest); such an
  // answer is shown as plain text instead, whole.
  const MAX_NESTING = 40;
  const md = window.markdownit({
    html: false, linkify: true, breaks: true, typographer: false, maxNesting: MAX_NESTING,
  });
  md.disable(["image"]);
  md.validateLink = function (url) {
    return SAFE_URL.test(String(url).trim());
  };

  // Headings under the page's <h1>, never skipping a level; a table cell's
  // alignment as a class (an inline style attribute would break the CSP).
  md.core.ruler.push("chat_shapes", function (state) {
    let previous = 1;
    let open = null;
    state.tokens.forEach(function (token) {
      if (token.type === "heading_open") {
        const wanted = Number(token.tag.slice(1)) + 1;
        const level = Math.min(wanted, previous + 1, 6);
        open = "h" + level;
        token.tag = open;
        previous = level;
      } else if (token.type === "heading_close" && open) {
        token.tag = open;
        open = null;
      } else if (token.type === "th_open" || token.type === "td_open") {
        const style = token.attrGet("style") || "";
        const align = /text-align:\s*(left|right|center)/.exec(style);
        token.attrs = null;
        if (align) token.attrSet("class", "align-" + align[1]);
      }
    });
  });

  const purify = window.DOMPurify(window);
  purify.addHook("uponSanitizeAttribute", function (node, data) {
    if (data.attrName === "class" && !SAFE_CLASS.test(data.attrValue)) data.keepAttr = false;
    if (data.attrName === "start" && !/^\d{1,9}$/.test(data.attrValue)) data.keepAttr = false;
  });
  purify.addHook("afterSanitizeAttributes", function (node) {
    if (node.nodeName === "A") {
      node.setAttribute("rel", "noopener noreferrer");
      node.setAttribute("target", "_blank");
    }
  });
  const PURIFY_OPTIONS = {
    ALLOWED_TAGS: TAGS,
    ALLOWED_ATTR: ATTRIBUTES,
    ALLOWED_URI_REGEXP: SAFE_URL,
    // DOMPurify checks every attribute not listed as URI-safe against the URL
    // pattern; a list's start number is not a URL.
    ADD_URI_SAFE_ATTR: ["start"],
    ALLOW_DATA_ATTR: false,
    ALLOW_ARIA_ATTR: false,
    RETURN_DOM_FRAGMENT: true,
  };

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = text;
    return node;
  }

  // --- copying a code block ----------------------------------------------------------

  // The block's own text: what stood between its fences, without the last line end.
  function codeText(pre) {
    return pre.textContent.replace(/\n$/, "");
  }

  function copyWithSelection(text) {
    const area = el("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    area.className = "visually-hidden";
    document.body.appendChild(area);
    area.select();
    let done = false;
    try {
      done = document.execCommand("copy");
    } catch (err) {
      done = false;
    }
    area.remove();
    return done;
  }

  function copy(pre, button) {
    const text = codeText(pre);
    const said = button.querySelector(".copy-label");
    function show(words) {
      said.textContent = words;
      clearTimeout(button._reset);
      button._reset = setTimeout(function () {
        said.textContent = gettext("Copy");
      }, 2000);
    }
    const viaApi = navigator.clipboard && window.isSecureContext
      ? navigator.clipboard.writeText(text)
      : Promise.reject(new Error("no clipboard"));
    viaApi.then(function () {
      show(gettext("Copied"));
    }, function () {
      show(copyWithSelection(text) ? gettext("Copied") : gettext("Select the code to copy it"));
    });
  }

  function decorateCode(pre) {
    const code = pre.querySelector("code");
    const match = code && /(?:^|\s)language-([A-Za-z0-9_+#.-]{1,40})/.exec(code.className);
    const label = match ? match[1] : gettext("code");
    const block = el("div", "code-block");
    const head = el("div", "code-head");
    head.appendChild(el("span", "code-lang", label));
    const button = el("button", "code-copy");
    button.type = "button";
    button.appendChild(el("span", "copy-label", gettext("Copy")));
    button.appendChild(el("span", "visually-hidden", " " + interpolate(gettext("%(language)s code"), { language: label }, true)));
    button.addEventListener("click", function () {
      copy(pre, button);
    });
    head.appendChild(button);
    pre.tabIndex = 0; // a long line scrolls inside the block: keyboard users can scroll it too
    pre.replaceWith(block);
    block.append(head, pre);
  }

  // markdown-it puts a line end between blocks; in the page it is only noise
  // (the text of a message would end in "\n" while it streams).
  const BLOCK_PARENTS = { UL: true, OL: true, LI: true, BLOCKQUOTE: true, TABLE: true, THEAD: true, TBODY: true,
    TR: true };

  function dropLayoutWhitespace(fragment) {
    const walker = document.createTreeWalker(fragment, NodeFilter.SHOW_TEXT);
    const blank = [];
    while (walker.nextNode()) {
      const node = walker.currentNode;
      const parent = node.parentNode;
      if (/^\s*$/.test(node.data) && (parent === fragment || BLOCK_PARENTS[parent.nodeName])) blank.push(node);
    }
    blank.forEach(function (node) {
      node.remove();
    });
  }

  // --- links that say where they go -------------------------------------------------
  //
  // A link's text is the model's (or an injected page's) to choose:
  // "[https://www.mybank.example/login](https://elsewhere/phish)" reads like
  // the bank. Every link carries its destination's host (shown on hover and
  // focus by the stylesheet); a link whose text looks like a URL, a domain or
  // an address of another host shows the real one beside it, and so does a
  // link whose query carries a long text (what a click would send).
  const URLISH = /^(?:[a-z][a-z0-9+.-]*:\/\/)?(?:[^\s@/:]+@)?((?:[a-z0-9\u00a1-\uffff-]+\.)+[a-z\u00a1-\uffff]{2,})(?::\d+)?(?:[/?#]\S*)?$/i;
  const LONG_QUERY = 80;

  function bareHost(host) {
    return String(host || "").toLowerCase().replace(/^www\./, "").replace(/\.$/, "");
  }

  function destination(href) {
    try {
      const url = new URL(href);
      if (url.protocol === "mailto:") {
        const address = decodeURIComponent(url.pathname);
        return { host: address.split("@").pop() || address, label: address, sends: url.search };
      }
      return { host: url.hostname, label: url.host, sends: decodeURIComponent(url.search + url.hash) };
    } catch (err) {
      return null;
    }
  }

  function decorateLink(link) {
    const target = destination(link.getAttribute("href") || "");
    if (!target) return;
    link.dataset.host = target.label;
    link.title = interpolate(gettext("Opens %(destination)s"), { destination: target.label }, true);
    const shown = URLISH.exec((link.textContent || "").trim());
    const posing = shown && bareHost(shown[1]) !== bareHost(target.host);
    const carries = target.sends.length > LONG_QUERY;
    if (!posing && !carries) return;
    link.classList.add(posing ? "link-posing" : "link-carrying");
    const note = el("span", "link-destination",
      " (" + interpolate(posing ? gettext("goes to %(destination)s") : gettext("sends text to %(destination)s"),
        { destination: target.label }, true) + ")");
    link.after(note);
  }

  function decorate(fragment) {
    dropLayoutWhitespace(fragment);
    fragment.querySelectorAll("a[href]").forEach(decorateLink);
    fragment.querySelectorAll("pre").forEach(decorateCode);
    fragment.querySelectorAll("table").forEach(function (table) {
      const scroller = el("div", "table-scroll");
      scroller.tabIndex = 0;
      table.replaceWith(scroller);
      scroller.appendChild(table);
    });
    return fragment;
  }

  // --- rendering -------------------------------------------------------------------

  function deepest(tokens) {
    let level = 0;
    tokens.forEach(function (token) {
      level = Math.max(level, token.level);
      (token.children || []).forEach(function (child) {
        level = Math.max(level, token.level + child.level);
      });
    });
    return level;
  }

  function render(text) {
    const tokens = md.parse(text || "", {});
    if (deepest(tokens) >= MAX_NESTING - 1) {
      const fragment = document.createDocumentFragment();
      fragment.appendChild(el("p", "too-deep", text));
      return fragment;
    }
    return decorate(purify.sanitize(md.renderer.render(tokens, md.options, {}), PURIFY_OPTIONS));
  }

  // Put `text` into `body`, rendered. An unfinished code fence shows as code
  // (CommonMark closes it at the end of the text).
  function renderInto(body, text) {
    body.classList.add("markdown");
    body.replaceChildren(render(text));
  }

  // A message being written: each change is rendered on the next frame, and
  // never more often than four times what the last render cost, so a long
  // answer (a 5,000-line code block) cannot keep the page busy.
  function live(body, painted) {
    let text = "";
    let waiting = false;
    let cost = 0;
    let last = 0;
    let finished = false;

    function paint() {
      waiting = false;
      if (finished) return;
      const started = performance.now();
      renderInto(body, text);
      body.getBoundingClientRect(); // the layout it causes counts in its cost
      last = performance.now();
      cost = last - started;
      if (painted) painted();
    }

    return {
      set: function (value) {
        text = value;
        if (waiting || finished) return;
        waiting = true;
        const pause = Math.max(0, cost * 4 - (performance.now() - last));
        setTimeout(function () {
          requestAnimationFrame(paint);
        }, pause);
      },
      text: function () {
        return text;
      },
      // The final text, rendered now; later scheduled paints do nothing.
      finish: function (value) {
        if (value !== undefined && value !== null) text = value;
        finished = true;
        renderInto(body, text);
        if (painted) painted();
      },
    };
  }

  // What a screen reader should hear for a rendered body: its text as laid
  // out, without the code blocks' labels and Copy buttons.
  function spokenText(body) {
    const heads = body.querySelectorAll(".code-head");
    heads.forEach(function (head) {
      head.hidden = true;
    });
    const text = body.innerText;
    heads.forEach(function (head) {
      head.hidden = false;
    });
    return text;
  }

  window.ChatMarkdown = { render: render, renderInto: renderInto, live: live, spokenText: spokenText };
})();
