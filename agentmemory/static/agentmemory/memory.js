// The memory page, enhanced. Without this script every form is a plain post
// that comes back to /memory/ with its error beside the field; with it:
//
// - Add, Correct, Remove, an expiry, the "Use memory in chats" switch, "Save
//   changes" and "Quality review" post the same form with fetch and
//   `Accept: application/json`. An error appears beside
//   its field and takes the focus; nothing navigates. A success refreshes the
//   entries in place and says so in a status line.
// - "Save changes" and the Save / Discard of a proposal under "Waiting for
//   you" post the same way; a proposal's outcome refreshes the list in place.
//   So does Tidy up, whose proposal then appears in that list.
// - When this person's memory commits anywhere (a chat turn, another tab, the
//   API), the chat socket at /ws/chat/ sends {"type": "memory_changed", ...};
//   the entries and History are then refreshed in place, keeping the scroll
//   position and the focus. While the person is typing or reading an error,
//   the page only offers to refresh.
//
// Memory text is never written by this script as markup: messages go in with
// textContent, and a refresh moves in the server's own escaped page.
//
// Its words come from Django's JavaScript catalogue (the page loads
// agentmemory's jsi18n before this script): gettext() and interpolate().
(function () {
  "use strict";

  // Without the catalogue (a project that leaves it out), the words stay English.
  var gettext = window.gettext || function (text) { return text; };
  var interpolate = window.interpolate || function (format, values) {
    return format.replace(/%\((\w+)\)s/g, function (match, name) { return String(values[name]); });
  };

  var root = document.getElementById("memory-page");
  if (!root || typeof window.fetch !== "function" || typeof window.DOMParser !== "function") {
    return;
  }
  document.documentElement.classList.add("js");
  var socketPath = root.getAttribute("data-socket-path") || "/ws/chat/";
  var live = document.getElementById("memory-live");
  var liveText = document.getElementById("memory-live-text");
  var status = document.getElementById("memory-status");
  var MAX_ATTEMPTS = 6;
  var attempts = 0;
  var leaving = false;
  var refreshing = null;
  var FOCUSABLE = "a[href], button, textarea, input:not([type=hidden]), summary, [tabindex]";
  var LEVELS = { ok: true, warn: true, full: true };
  var NOT_SENT = gettext("The change could not be sent. Check your connection and try again.");
  var NOT_READ = gettext("The change could not be saved. Reload the page and try again.");
  var SWITCH_STATES = {
    on: gettext("On: the assistant reads this memory in your chats and may update it."),
    off: gettext("Off: your chats neither read nor change your memory. What is stored stays here."),
  };
  var LANGUAGE = document.documentElement.lang || "en";

  window.addEventListener("pagehide", function () {
    leaving = true;
  });

  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = text;
    return node;
  }

  function content() {
    return document.getElementById("memory-content");
  }

  // --- errors beside the field, and the status line ---------------------------

  function clearFieldError(form) {
    var slot = document.getElementById(form.getAttribute("data-error-slot") || "");
    if (slot) slot.replaceChildren();
    var field = form.querySelector("textarea");
    if (field) field.removeAttribute("aria-invalid");
    var entry = form.closest(".memory-entry, .proposal, .change");
    if (entry) entry.classList.remove("has-error");
  }

  function showFieldError(form, message) {
    var slot = document.getElementById(form.getAttribute("data-error-slot") || "");
    var line = el("p", "memory-error", message);
    line.tabIndex = -1;
    if (slot) {
      slot.replaceChildren(line);
    } else {
      form.appendChild(line);
    }
    var field = form.querySelector("textarea");
    if (field) field.setAttribute("aria-invalid", "true");
    var entry = form.closest(".memory-entry, .proposal, .change");
    if (entry) entry.classList.add("has-error");
    line.focus();
  }

  function showStatus(message) {
    if (!status) return;
    var list = el("ul", "memory-messages");
    list.appendChild(el("li", null, message));
    status.replaceChildren(list);
  }

  function focusServerError() {
    // After a plain post's redirect, the error beside its field gets the focus.
    var error = root.querySelector(".memory-page-error, .memory-field-error .memory-error");
    if (!error) return;
    error.tabIndex = -1;
    error.focus({ preventScroll: true });
    error.scrollIntoView({ block: "center" });
  }

  // --- posting the forms ----------------------------------------------------------

  var ENHANCED = ".memory-add, .memory-correct, .memory-remove, .memory-expiry, .memory-switch, .memory-save-mode, " +
    ".memory-review-setting, .proposal-save, .proposal-discard, .change-undo, .change-restore, .memory-tidy";
  var TIDYING = gettext("Asking the assistant to tidy up\u2026 This can take a few seconds.");

  root.addEventListener("submit", function (event) {
    var form = event.target;
    if (!(form instanceof HTMLFormElement) || !form.matches(ENHANCED)) return;
    event.preventDefault();
    if (form.getAttribute("aria-busy") === "true") return;
    form.setAttribute("aria-busy", "true");
    // Tidy up is one model request: say that it runs.
    if (form.matches(".memory-tidy")) showStatus(TIDYING);
    // An expiry is read in the person's own time zone: the browser names it.
    var zone = form.querySelector('input[name="tz"]');
    if (zone && window.Intl) zone.value = Intl.DateTimeFormat().resolvedOptions().timeZone || "";
    var body = new FormData(form);
    fetch(form.action, {
      method: "POST",
      body: body,
      credentials: "same-origin",
      headers: { Accept: "application/json" },
    }).then(function (response) {
      var type = response.headers.get("Content-Type") || "";
      if (type.indexOf("application/json") === -1) return { ok: false, message: NOT_READ };
      return response.json().catch(function () {
        return { ok: false, message: NOT_READ };
      });
    }, function () {
      return { ok: false, message: NOT_SENT };
    }).then(function (answer) {
      form.removeAttribute("aria-busy");
      if (!answer || !answer.ok) {
        if (form.matches(".memory-switch")) revertSwitch(form);
        if (form.matches(".memory-save-mode")) revertSaveMode();
        if (form.matches(".memory-review-setting")) revertReviewSetting();
        showFieldError(form, (answer && answer.message) || NOT_READ);
        return;
      }
      clearFieldError(form);
      if (form.matches(".memory-switch")) {
        setSwitch(answer.use_memory);
        showStatus(answer.message);
        return;
      }
      if (form.matches(".memory-review-setting")) {
        setReviewSetting(answer.allow_review);
        showStatus(answer.message);
        return;
      }
      if (form.matches(".memory-save-mode")) {
        setSaveMode(answer.save_mode);
        showStatus(answer.message);
        refresh(); // "Waiting for you" shows while the assistant asks first
        return;
      }
      var next = focusAfter(form);
      if (form.matches(".memory-add")) {
        var field = form.querySelector("textarea");
        field.value = "";
        field.defaultValue = "";
      }
      showStatus(answer.message);
      refresh({ focus: next });
    });
  });

  // A date typed into an expiry form means "until a date", whatever its select
  // showed (the server reads it the same way without this script).
  root.addEventListener("input", function (event) {
    var field = event.target;
    if (!(field instanceof HTMLInputElement) || field.type !== "date" || !field.value) return;
    var form = field.closest(".memory-expiry");
    var preset = form ? form.querySelector('select[name="preset"]') : null;
    if (preset && preset.value !== "") preset.value = "";
  });

  // Where the focus goes after a change: the add box stays; after a
  // correction or a removal, the entry now in that place, else the add box.
  function focusAfter(form) {
    if (form.matches(".memory-tidy")) {
      // The tidy proposal appears under "Waiting for you", whose heading comes first.
      return { id: "proposals-title" };
    }
    if (form.matches(".proposal-save, .proposal-discard")) {
      // The section's heading while it stays (other proposals, or asking first), else the first add box.
      return { id: "proposals-title", fallback: "add-user" };
    }
    if (form.matches(".memory-add")) {
      return { id: form.querySelector("textarea").id };
    }
    if (form.matches(".change-undo, .change-restore")) {
      // The undo or restore is the newest change now: History's heading, above it.
      return { id: "history-title" };
    }
    var slot = form.getAttribute("data-error-slot") || "";
    var match = /^entry-(\w+)-(\d+)-error$/.exec(slot);
    if (!match) return null;
    return { summary: "correct-" + match[1] + "-" + match[2] + "-details", id: "add-" + match[1] };
  }

  // --- the switch ----------------------------------------------------------------

  var switchForm = document.getElementById("memory-switch");
  var switchBox = document.getElementById("use-memory");
  var switchState = document.getElementById("use-memory-state");

  function setSwitch(on) {
    if (!switchBox) return;
    switchBox.checked = !!on;
    switchBox.setAttribute("data-saved", on ? "1" : "0");
    if (switchState) switchState.textContent = on ? SWITCH_STATES.on : SWITCH_STATES.off;
  }

  function revertSwitch() {
    if (switchBox) switchBox.checked = switchBox.getAttribute("data-saved") === "1";
  }

  if (switchForm && switchBox) {
    switchBox.setAttribute("data-saved", switchBox.checked ? "1" : "0");
    switchBox.addEventListener("change", function () {
      switchForm.requestSubmit();
    });
  }

  // --- "Save changes": save automatically or ask first -------------------------------

  var saveModeForm = document.getElementById("save-mode");
  var saveModeState = document.getElementById("save-mode-state");
  var SAVE_MODE_STATES = {
    ask: gettext("The assistant proposes each memory change; nothing is saved until you choose Save."),
    auto: gettext("The assistant saves a memory change when its reply completes."),
  };

  function saveModeChoices() {
    return saveModeForm ? saveModeForm.querySelectorAll('input[name="save_mode"]') : [];
  }

  function setSaveMode(mode) {
    if (!SAVE_MODE_STATES[mode]) return;
    Array.prototype.forEach.call(saveModeChoices(), function (choice) {
      choice.checked = choice.value === mode;
    });
    if (saveModeForm) saveModeForm.setAttribute("data-saved", mode);
    if (saveModeState) saveModeState.textContent = SAVE_MODE_STATES[mode];
  }

  function revertSaveMode() {
    if (saveModeForm) setSaveMode(saveModeForm.getAttribute("data-saved"));
  }

  if (saveModeForm) {
    var checked = saveModeForm.querySelector('input[name="save_mode"]:checked');
    saveModeForm.setAttribute("data-saved", checked ? checked.value : "auto");
    saveModeForm.addEventListener("change", function () {
      saveModeForm.requestSubmit();
    });
  }

  // --- "Quality review": support staff may sample, or never --------------------------
  // Its Apply button is hidden like the others' (`.js .memory-switch-save`): a
  // choice saves as it is made. The two state sentences come translated from
  // the page (data-state-allowed, data-state-refused).

  var reviewForm = document.getElementById("review-setting");
  var reviewState = document.getElementById("review-setting-state");

  function setReviewSetting(allowed) {
    if (!reviewForm) return;
    var value = allowed ? "1" : "0";
    Array.prototype.forEach.call(reviewForm.querySelectorAll('input[name="allow_review"]'), function (choice) {
      choice.checked = choice.value === value;
    });
    reviewForm.setAttribute("data-saved", value);
    var sentence = reviewForm.getAttribute(allowed ? "data-state-allowed" : "data-state-refused");
    if (reviewState && sentence) reviewState.textContent = sentence;
  }

  function revertReviewSetting() {
    if (reviewForm) setReviewSetting(reviewForm.getAttribute("data-saved") === "1");
  }

  if (reviewForm) {
    var allowed = reviewForm.querySelector('input[name="allow_review"]:checked');
    reviewForm.setAttribute("data-saved", allowed ? allowed.value : "0");
    reviewForm.addEventListener("change", function () {
      reviewForm.requestSubmit();
    });
  }

  // --- usage ------------------------------------------------------------------------

  function levelOf(numbers) {
    if (LEVELS[numbers.level]) return numbers.level;
    if (numbers.percent >= 90) return "full";
    return numbers.percent >= 75 ? "warn" : "ok";
  }

  function setLevel(node, level) {
    if (!node) return;
    Object.keys(LEVELS).forEach(function (name) {
      node.classList.toggle("level-" + name, name === level);
    });
  }

  function updateUsage(usage) {
    Object.keys(usage || {}).forEach(function (target) {
      var numbers = usage[target] || {};
      if (typeof numbers.used !== "number" || typeof numbers.limit !== "number") return;
      var label = root.querySelector('[data-usage-label="' + target + '"]');
      var meter = root.querySelector('[data-usage-meter="' + target + '"]');
      var level = levelOf(numbers);
      if (label) {
        // %(percent)s carries its own "%" sign: the catalogue's interpolate() knows no "%%".
        label.textContent = interpolate(gettext("%(used)s of %(limit)s characters (%(percent)s)"), {
          used: numbers.used.toLocaleString(LANGUAGE),
          limit: numbers.limit.toLocaleString(LANGUAGE),
          percent: numbers.percent + "%",
        }, true);
        setLevel(label, level);
      }
      if (meter) {
        meter.value = numbers.used;
        setLevel(meter, level);
      }
      setLevel(root.querySelector('[data-usage="' + target + '"]'), level);
    });
  }

  // --- refreshing in place ----------------------------------------------------------

  function focusKey(node) {
    var area = content();
    if (!node || node === document.body || !area || !area.contains(node)) return null;
    if (node.id) return { id: node.id };
    var anchor = node.parentElement ? node.parentElement.closest("[id]") : null;
    if (!anchor || !area.contains(anchor)) return null;
    var index = Array.prototype.indexOf.call(anchor.querySelectorAll(FOCUSABLE), node);
    return index < 0 ? null : { within: anchor.id, index: index };
  }

  function restoreFocus(key) {
    if (!key) return false;
    var node = null;
    if (key.summary) {
      var details = document.getElementById(key.summary);
      node = details ? details.querySelector("summary") : null;
    }
    if (!node && key.within) {
      var anchor = document.getElementById(key.within);
      node = anchor ? anchor.querySelectorAll(FOCUSABLE)[key.index] || null : null;
    }
    if (!node && key.id) node = document.getElementById(key.id);
    if (!node && key.fallback) node = document.getElementById(key.fallback);
    if (!node) return false;
    node.focus({ preventScroll: true });
    return document.activeElement === node;
  }

  function refresh(options) {
    options = options || {};
    if (refreshing) {
      refreshing.again = refreshing.again || options;
      return refreshing.promise;
    }
    var url = window.location.pathname + window.location.search;
    var state = { again: null };
    refreshing = state;
    // While set, the entries are about to be replaced (a test, or a person's tool, can wait for it to go).
    root.setAttribute("data-refreshing", "true");
    state.promise = fetch(url, {
      credentials: "same-origin",
      headers: { Accept: "text/html" },
    }).then(function (response) {
      if (!response.ok) throw new Error("not refreshed");
      return response.text();
    }).then(function (html) {
      var fresh = new DOMParser().parseFromString(html, "text/html").getElementById("memory-content");
      var current = content();
      if (!fresh || !current) throw new Error("not refreshed");
      // A refresh nobody asked for (another tab, a chat) never takes away what was typed
      // while it was on its way: it offers the reload instead.
      if (options.careful && (hasUnsavedTyping() || showsError())) {
        offerReload(gettext("Your memory changed in a chat or another window. " +
          "Reload to see the current entries (unsaved text here will be lost)."));
        return;
      }
      var x = window.scrollX;
      var y = window.scrollY;
      var focused = options.focus || focusKey(document.activeElement);
      var open = Array.prototype.map.call(current.querySelectorAll("details[open]"), function (node) {
        return node.id;
      });
      current.replaceWith(document.importNode(fresh, true));
      open.forEach(function (id) {
        var details = id && document.getElementById(id);
        if (details) details.open = true;
      });
      restoreFocus(focused);
      window.scrollTo(x, y);
      if (live) live.hidden = true;
    }).catch(function () {
      offerReload(gettext("Your memory changed. Reload the page to see the current entries."));
    }).then(function () {
      refreshing = null;
      if (state.again) {
        refresh(state.again);
      } else {
        root.removeAttribute("data-refreshing");
      }
    });
    return state.promise;
  }

  function offerReload(text) {
    if (live && liveText) {
      liveText.textContent = text;
      live.hidden = false;
    }
  }

  // --- live updates -------------------------------------------------------------------

  function hasUnsavedTyping() {
    var fields = root.querySelectorAll("#memory-content textarea");
    for (var i = 0; i < fields.length; i += 1) {
      if (fields[i].value !== fields[i].defaultValue) {
        return true;
      }
    }
    return false;
  }

  function showsError() {
    return root.querySelector("#memory-content .memory-error") !== null;
  }

  function onMemoryChanged(frame) {
    if (leaving) {
      return;
    }
    updateUsage(frame.usage);
    if (hasUnsavedTyping() || showsError()) {
      offerReload(gettext("Your memory changed in a chat or another window. " +
        "Reload to see the current entries (unsaved text here will be lost)."));
      return;
    }
    refresh({ careful: true });
  }

  function connect() {
    if (typeof window.WebSocket !== "function") return;
    var scheme = window.location.protocol === "https:" ? "wss://" : "ws://";
    var socket;
    try {
      socket = new WebSocket(scheme + window.location.host + socketPath);
    } catch (error) {
      return;
    }
    socket.addEventListener("open", function () {
      attempts = 0;
    });
    socket.addEventListener("message", function (event) {
      var frame;
      try {
        frame = JSON.parse(event.data);
      } catch (error) {
        return;
      }
      if (frame && frame.type === "memory_changed") {
        onMemoryChanged(frame);
      } else if (frame && frame.type === "memory_settings" && typeof frame.use_memory === "boolean") {
        setSwitch(frame.use_memory);
      }
    });
    socket.addEventListener("close", function (event) {
      // 4401: not signed in; 4429: too many open pages. Retrying cannot help.
      if (leaving || event.code === 4401 || event.code === 4429 || attempts >= MAX_ATTEMPTS) {
        return;
      }
      attempts += 1;
      window.setTimeout(connect, Math.min(30000, 1000 * Math.pow(2, attempts)));
    });
  }

  // A chat's proposal sends no frame: when the person comes back to this tab,
  // "Waiting for you" is brought up to date the same careful way.
  document.addEventListener("visibilitychange", function () {
    if (document.visibilityState !== "visible" || leaving) return;
    if (hasUnsavedTyping() || showsError()) return;
    refresh({ careful: true });
  });

  focusServerError();
  connect();
})();
