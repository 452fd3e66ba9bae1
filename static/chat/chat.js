// The web chat: one WebSocket for turns, the REST API for history.
// Messages and memory are untrusted text: everything is written with
// textContent, never innerHTML.
(function () {
  "use strict";

  const root = document.getElementById("chat");
  if (!root) return;

  const listUrl = root.dataset.conversationsUrl;
  const csrfToken = root.dataset.csrfToken;
  const maxChars = Number(root.dataset.maxChars);
  const messages = document.getElementById("messages");
  const composer = document.getElementById("composer");
  const input = document.getElementById("message");
  const sendButton = document.getElementById("send");
  const stopButton = document.getElementById("stop");
  const connection = document.getElementById("connection");
  const conversationList = document.getElementById("conversation-list");
  const usageLine = document.getElementById("memory-usage");

  let socket = null;
  let retryDelay = 500;
  let conversationId = null;
  let running = null; // {turnId, bubble, body, notes}

  const OUTCOME_LABELS = {
    committed: "Memory saved",
    nothing_to_commit: "No memory change",
    unavailable: "Memory unavailable this turn",
    disabled: "Memory off",
    discarded: "Memory change discarded",
    rejected: "Memory change not saved",
  };

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = text;
    return node;
  }

  function scrollDown() {
    messages.scrollTop = messages.scrollHeight;
  }

  function usageText(usage) {
    if (!usage) return "";
    return "Profile " + usage.user.label + " · Notes " + usage.memory.label;
  }

  function showUsage(usage) {
    if (!usage) return;
    usageLine.textContent = "Memory: " + usageText(usage);
    usageLine.hidden = false;
  }

  function outcomeLine(memory) {
    if (!memory || !memory.status) return null;
    const label = OUTCOME_LABELS[memory.status] || memory.status;
    // The server's message already says what the label says ("Memory saved."):
    // show it alone, and the label only when there is none.
    const line = el("p", "outcome outcome-" + memory.status, memory.message || label + ".");
    line.title = memory.status;
    return line;
  }

  function addMessage(role, content, memoryStatus) {
    const item = el("li", "message message-" + role);
    item.appendChild(el("span", "message-role", role === "user" ? "You" : "Assistant"));
    const body = el("div", "message-body", content);
    item.appendChild(body);
    const notes = el("div", "message-notes");
    item.appendChild(notes);
    if (memoryStatus && role === "assistant") {
      const line = outcomeLine({ status: memoryStatus, message: "" });
      if (line) notes.appendChild(line);
    } else if (memoryStatus && role === "user" && memoryStatus === "discarded") {
      notes.appendChild(el("p", "outcome outcome-discarded", "This turn did not complete; nothing was saved."));
    }
    messages.appendChild(item);
    scrollDown();
    return { item: item, body: body, notes: notes };
  }

  function setRunning(turn) {
    running = turn;
    stopButton.disabled = !turn;
    sendButton.disabled = !!turn;
  }

  // --- the socket ------------------------------------------------------------

  function connect() {
    const scheme = location.protocol === "https:" ? "wss://" : "ws://";
    socket = new WebSocket(scheme + location.host + root.dataset.socketPath);
    socket.addEventListener("open", function () {
      retryDelay = 500;
      connection.textContent = "Connected.";
      connection.className = "connection ok";
    });
    socket.addEventListener("close", function (event) {
      if (event.code === 4401) {
        location.href = "/accounts/login/?next=/";
        return;
      }
      if (event.code === 4429) {
        // Too many open pages: this one was closed for a newer one. Reconnecting
        // would close another page in turn, so stay closed until reloaded.
        setRunning(null);
        connection.textContent = "Closed: this chat is open in too many pages. Reload to use it here.";
        connection.className = "connection down";
        return;
      }
      if (running) {
        running.notes.appendChild(el("p", "outcome outcome-discarded",
          "The connection dropped before the turn completed; nothing was saved."));
        setRunning(null);
      }
      connection.textContent = "Disconnected; reconnecting…";
      connection.className = "connection down";
      setTimeout(connect, retryDelay);
      retryDelay = Math.min(retryDelay * 2, 10000);
    });
    socket.addEventListener("message", function (event) {
      let frame;
      try {
        frame = JSON.parse(event.data);
      } catch (err) {
        return;
      }
      handle(frame);
    });
  }

  function handle(frame) {
    switch (frame.type) {
      case "turn_started": {
        const isNew = conversationId !== frame.conversation_id;
        conversationId = frame.conversation_id;
        const bubble = addMessage("assistant", "");
        bubble.item.classList.add("pending");
        setRunning({ turnId: frame.turn_id, bubble: bubble.item, body: bubble.body, notes: bubble.notes });
        if (isNew) loadConversations();
        break;
      }
      case "delta":
        if (!running || frame.turn_id !== running.turnId) break;
        if (frame.reset) running.body.textContent = "";
        running.body.textContent += frame.text;
        scrollDown();
        break;
      case "tool":
        if (!running || frame.turn_id !== running.turnId) break;
        running.notes.appendChild(el("p", "tool-note", frame.message));
        break;
      case "turn_completed":
        if (!running || frame.turn_id !== running.turnId) break;
        running.body.textContent = frame.message.content;
        running.bubble.classList.remove("pending");
        if (frame.notice) running.notes.appendChild(el("p", "notice", frame.notice));
        appendOutcome(running.notes, frame.memory);
        showUsage(frame.memory && frame.memory.usage);
        setRunning(null);
        break;
      case "turn_failed":
        if (!running || frame.turn_id !== running.turnId) break;
        running.bubble.classList.remove("pending");
        running.bubble.classList.add("failed");
        running.notes.appendChild(el("p", "error", frame.message));
        appendOutcome(running.notes, frame.memory);
        setRunning(null);
        break;
      case "memory_changed":
        showUsage(frame.usage);
        break;
      case "error":
        addNotice(frame.message);
        break;
    }
  }

  function appendOutcome(notes, memory) {
    const line = outcomeLine(memory);
    if (line) notes.appendChild(line);
  }

  function addNotice(text) {
    const item = el("li", "message message-notice", text);
    messages.appendChild(item);
    scrollDown();
  }

  // --- sending -----------------------------------------------------------------

  composer.addEventListener("submit", function (event) {
    event.preventDefault();
    const content = input.value;
    if (!content.trim()) return;
    if (content.length > maxChars) {
      addNotice("The message has " + content.length + " characters; the limit is " + maxChars + ".");
      return;
    }
    if (!socket || socket.readyState !== WebSocket.OPEN) {
      addNotice("Not connected yet; wait a moment and send again.");
      return;
    }
    addMessage("user", content);
    socket.send(JSON.stringify({ type: "user_message", content: content, conversation_id: conversationId }));
    input.value = "";
    updateCounter();
  });

  // --- the character counter, shown near the limit ------------------------------

  const counter = el("p", "message-count");
  counter.id = "message-count";
  counter.hidden = true;
  composer.after(counter);
  input.setAttribute("aria-describedby", counter.id);
  let pasteCut = false;

  function updateCounter() {
    const length = input.value.length;
    if (length < Math.floor(maxChars * 0.9)) {
      counter.hidden = true;
      pasteCut = false;
      return;
    }
    let text = length.toLocaleString("en-US") + " of " + maxChars.toLocaleString("en-US") + " characters";
    if (length >= maxChars) text += pasteCut ? ": the limit. The pasted text was cut to fit." : ": the limit.";
    counter.textContent = text;
    counter.classList.toggle("at-limit", length >= maxChars);
    counter.hidden = false;
  }

  input.addEventListener("paste", function (event) {
    const pasted = (event.clipboardData && event.clipboardData.getData("text")) || "";
    const kept = input.value.length - (input.selectionEnd - input.selectionStart);
    pasteCut = kept + pasted.length > maxChars;
  });
  input.addEventListener("input", updateCounter);

  input.addEventListener("keydown", function (event) {
    if (event.key === "Enter" && !event.shiftKey) {
      event.preventDefault();
      composer.requestSubmit();
    }
  });

  stopButton.addEventListener("click", function () {
    if (socket && socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify({ type: "cancel" }));
  });

  // --- history -------------------------------------------------------------------

  function api(url, options) {
    const settings = Object.assign({ credentials: "same-origin", headers: {} }, options || {});
    settings.headers = Object.assign({ Accept: "application/json" }, settings.headers);
    if (settings.method && settings.method !== "GET") settings.headers["X-CSRFToken"] = csrfToken;
    return fetch(url, settings).then(function (response) {
      if (!response.ok) throw new Error("HTTP " + response.status);
      return response.status === 204 ? null : response.json();
    });
  }

  function loadConversations() {
    return api(listUrl).then(function (items) {
      conversationList.replaceChildren();
      if (!items.length) {
        conversationList.appendChild(el("li", "empty", "No conversations yet."));
        return;
      }
      items.forEach(function (conversation) {
        const item = el("li");
        item.dataset.conversationId = conversation.id;
        if (conversation.id === conversationId) item.classList.add("current");
        item.appendChild(el("button", "conversation-open", conversation.title || "Untitled"));
        const del = el("button", "conversation-delete", "×");
        del.setAttribute("aria-label", "Delete this conversation");
        del.title = "Delete";
        item.appendChild(del);
        conversationList.appendChild(item);
      });
    }).catch(function () {
      addNotice("Could not load your conversations; reload the page.");
    });
  }

  function openConversation(id) {
    if (running) return;
    api(listUrl + id + "/messages/").then(function (items) {
      conversationId = id;
      messages.replaceChildren();
      items.forEach(function (message) {
        addMessage(message.role, message.content, message.memory_outcome);
      });
      loadConversations();
    }).catch(function () {
      addNotice("Could not open that conversation; it may have been deleted.");
      loadConversations();
    });
  }

  conversationList.addEventListener("click", function (event) {
    const item = event.target.closest("li[data-conversation-id]");
    if (!item) return;
    const id = Number(item.dataset.conversationId);
    if (event.target.classList.contains("conversation-delete")) {
      if (!confirm("Delete this conversation? This cannot be undone.")) return;
      api(listUrl + id + "/", { method: "DELETE" }).then(function () {
        if (id === conversationId) startNew();
        loadConversations();
      });
    } else if (event.target.classList.contains("conversation-open")) {
      openConversation(id);
    }
  });

  function startNew() {
    if (running) return;
    conversationId = null;
    messages.replaceChildren();
    loadConversations();
    input.focus();
  }

  document.getElementById("new-conversation").addEventListener("click", startNew);
  document.getElementById("delete-all").addEventListener("click", function () {
    if (!confirm("Delete all your conversations? This cannot be undone. Your memory is not affected.")) return;
    api(listUrl, { method: "DELETE" }).then(startNew);
  });

  // Reopen the newest conversation (the page lists them newest first). A
  // message sent before its history arrives still goes to it; the history is
  // then put above what is already shown.
  function reopenLatest() {
    const latest = conversationList.querySelector("li[data-conversation-id]");
    if (!latest) return;
    const id = Number(latest.dataset.conversationId);
    conversationId = id;
    latest.classList.add("current");
    api(listUrl + id + "/messages/").then(function (items) {
      if (conversationId !== id) return; // the person moved on meanwhile
      const first = messages.firstChild;
      items.forEach(function (message) {
        const added = addMessage(message.role, message.content, message.memory_outcome);
        if (first) messages.insertBefore(added.item, first);
      });
      scrollDown();
    }).catch(function () {
      if (conversationId === id && !running) startNew();
    });
  }

  reopenLatest();
  connect();
})();
