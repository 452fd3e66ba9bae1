// Keeps the memory page current. When this person's memory commits anywhere
// (a chat turn, another tab, the API), the chat socket at /ws/chat/ sends
// {"type": "memory_changed", "usage": {...}}; the page then reloads itself,
// unless the person is typing or reading an error, in which case it says so.
// Without a socket (none served, refused, or offline) the page is a plain
// form page and nothing here gets in the way. Memory text is never written
// by this script; usage numbers go in with textContent.
(function () {
  "use strict";

  var root = document.getElementById("memory-page");
  if (!root || typeof window.WebSocket !== "function") {
    return;
  }
  var socketPath = root.getAttribute("data-socket-path") || "/ws/chat/";
  var pageUrl = root.getAttribute("data-page-url") || window.location.pathname;
  var live = document.getElementById("memory-live");
  var liveText = document.getElementById("memory-live-text");
  var MAX_ATTEMPTS = 6;
  var attempts = 0;
  var leaving = false;

  document.addEventListener("submit", function () {
    leaving = true;
  });
  window.addEventListener("pagehide", function () {
    leaving = true;
  });

  function hasUnsavedTyping() {
    var fields = root.querySelectorAll("textarea");
    for (var i = 0; i < fields.length; i += 1) {
      if (fields[i].value !== fields[i].defaultValue) {
        return true;
      }
    }
    return false;
  }

  function showsError() {
    return root.querySelector(".memory-error") !== null;
  }

  function updateUsage(usage) {
    Object.keys(usage || {}).forEach(function (target) {
      var numbers = usage[target] || {};
      var label = root.querySelector('[data-usage-label="' + target + '"]');
      var meter = root.querySelector('[data-usage-meter="' + target + '"]');
      if (label && typeof numbers.used === "number" && typeof numbers.limit === "number") {
        label.textContent = numbers.used.toLocaleString("en-US") + " of " + numbers.limit.toLocaleString("en-US") + " characters (" + numbers.percent + "%)";
      }
      if (meter && typeof numbers.used === "number") {
        meter.value = numbers.used;
      }
    });
  }

  function onMemoryChanged(frame) {
    if (leaving) {
      return;
    }
    updateUsage(frame.usage);
    if (hasUnsavedTyping() || showsError()) {
      if (live && liveText) {
        liveText.textContent = "Your memory changed in a chat or another window. " +
          "Reload to see the current entries (unsaved text here will be lost).";
        live.hidden = false;
      }
      return;
    }
    leaving = true;
    // The page URL, not reload(): after a failed post the address is the
    // form's, and reloading it would post again.
    window.location.assign(pageUrl);
  }

  function connect() {
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
      }
    });
    socket.addEventListener("close", function (event) {
      // 4401: not signed in; retrying cannot help.
      if (leaving || event.code === 4401 || attempts >= MAX_ATTEMPTS) {
        return;
      }
      attempts += 1;
      window.setTimeout(connect, Math.min(30000, 1000 * Math.pow(2, attempts)));
    });
  }

  connect();
})();
