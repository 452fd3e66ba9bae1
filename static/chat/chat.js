// The web chat: one WebSocket for turns, the REST API for history.
// Messages and memory are untrusted text: everything is written with
// textContent, never innerHTML. An assistant message's body is the one
// exception: it is Markdown, rendered by markdown.js (markdown-it with raw
// HTML off, then DOMPurify's allow-list, as a DOM fragment), live as it
// streams and again when a conversation is reopened.
//
// A reply streams into its bubble word by word, but screen readers hear it
// once: the polite live region #reply-announcer gets the finished text only.
// A temporary chat (the "Temporary chat" switch) sends "temporary": true
// with the server's temporary_id; it is not listed and ends with the socket.
(function () {
  "use strict";

  const root = document.getElementById("chat");
  if (!root) return;

  // The page's words come from the JavaScript catalogue (config/urls.py,
  // locale/<lang>/LC_MESSAGES/djangojs.po), loaded before this script, in the
  // page's language; without it they stay English. The server's sentences
  // (frame.message, memory.message, detail) arrive already translated.
  const gettext = window.gettext || function (text) { return text; };
  const interpolate = window.interpolate || function (format, values) {
    return format.replace(/%\((\w+)\)s/g, function (match, name) { return String(values[name]); });
  };
  const pageLanguage = document.documentElement.lang || "en";

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
  const fullNotice = document.getElementById("memory-full-notice");
  const announcer = document.getElementById("reply-announcer");
  const title = document.getElementById("chat-title");
  const temporaryToggle = document.getElementById("temporary-toggle");
  const temporaryBanner = document.getElementById("temporary-banner");
  const memorySwitch = document.getElementById("use-memory");
  const memoryLink = document.getElementById("memory-link");
  const settingsUrl = root.dataset.settingsUrl;
  const memoryUrl = root.dataset.memoryUrl || "/memory/";
  const proposalsUrl = root.dataset.proposalsUrl || "/api/memory/proposals/";
  const changesUrl = root.dataset.changesUrl || "/api/memory/changes/";

  let socket = null;
  let retryDelay = 500;
  let conversationId = null;
  let running = null; // {turnId, bubble, body, notes}
  let temporary = false; // a temporary chat: not kept, no memory
  let temporaryId = null; // the server's id of the temporary chat, after its first turn
  let refusedForCapacity = false;

  const OUTCOME_LABELS = {
    committed: gettext("Memory saved"),
    proposed: gettext("Memory change proposed"),
    nothing_to_commit: gettext("No memory change"),
    unavailable: gettext("Memory unavailable this turn"),
    disabled: gettext("Memory off"),
    discarded: gettext("Memory change discarded"),
    rejected: gettext("Memory change not saved"),
    unconfirmed: gettext("Memory change not confirmed"),
  };
  const LEVELS = { ok: true, warn: true, full: true };

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = text;
    return node;
  }

  // The newest message in view: the list scrolls on wide screens; on a phone
  // the page may scroll too, so the message is brought into the viewport.
  function scrollDown() {
    messages.scrollTop = messages.scrollHeight;
    const last = messages.lastElementChild;
    if (!last) return;
    const box = last.getBoundingClientRect();
    if (box.bottom > window.innerHeight || box.top < 0) last.scrollIntoView({ block: "nearest" });
  }

  function announce(text) {
    if (!announcer) return;
    announcer.replaceChildren(el("p", null, text));
  }

  // --- usage and the memory-full notice --------------------------------------------

  function levelOf(numbers) {
    if (LEVELS[numbers.level]) return numbers.level;
    if (numbers.percent >= 90) return "full";
    return numbers.percent >= 75 ? "warn" : "ok";
  }

  function showUsage(usage) {
    if (!usage || !usage.user || !usage.memory) return;
    const parts = [["user", gettext("Profile") + " "], ["memory", gettext("Notes") + " "]].map(function (pair) {
      const numbers = usage[pair[0]];
      const part = el("span", "usage-part level-" + levelOf(numbers), pair[1] + numbers.label);
      part.dataset.usagePart = pair[0];
      return part;
    });
    usageLine.replaceChildren(gettext("Memory:") + " ", parts[0], " · ", parts[1]);
    usageLine.hidden = false;
    updateFullNotice(usage);
  }

  function updateFullNotice(usage) {
    if (!fullNotice) return;
    const full = !!usage && ["user", "memory"].some(function (target) {
      return usage[target] && levelOf(usage[target]) === "full";
    });
    fullNotice.hidden = !(full || refusedForCapacity);
  }

  function noteCapacity(memory) {
    if (!memory) return;
    if (memory.memory_full) {
      refusedForCapacity = true;
      if (fullNotice) fullNotice.hidden = false;
    }
  }

  function outcomeLine(memory) {
    if (!memory || !memory.status) return null;
    const label = OUTCOME_LABELS[memory.status] || gettext("Memory");
    // The server's message already says what the label says ("Memory saved."):
    // show it alone, and the label only when there is none. Codes stay out.
    const line = el("p", "outcome outcome-" + memory.status, memory.message || label + ".");
    if (memory.status === "committed" && memory.changed && memory.changed.length) {
      line.append(" ");
      const link = el("a", null, gettext("See it on your memory page"));
      link.href = memoryUrl + "#document-" + memory.changed[0];
      line.append(link, ".");
      if (memory.change_id) {
        line.append(" ");
        line.appendChild(undoButton(line, memory.change_id));
      }
    }
    return line;
  }

  // "Undo" on a "Memory saved" line: the turn's change, undone through the memory API
  // (/api/memory/changes/<id>/undo/). The answer's plain sentence replaces the line; a
  // refusal (the entry changed since) says why, and the memory page's History still has it.
  const UNDO_WORDS = {
    done: gettext("Undone: your memory is as it was before this reply."),
    unchanged: gettext("Your memory already held what this would bring back; nothing changed."),
    offline: gettext("The undo could not be sent; nothing changed. Check your connection and try again."),
    failed: gettext("This change could not be undone; nothing changed. Your memory page's History has it."),
  };

  function undoButton(line, changeId) {
    const button = el("button", "outcome-undo", gettext("Undo"));
    button.type = "button";
    button.appendChild(el("span", "visually-hidden", " " + gettext("this memory change")));
    button.addEventListener("click", function () {
      if (button.disabled) return;
      button.disabled = true;
      apiAnswer(changesUrl + changeId + "/undo/", { method: "POST" }).then(function (answer) {
        const result = el("p", "outcome outcome-undo-result");
        result.setAttribute("role", "status");
        if (answer.status === 200) {
          result.textContent = answer.body && answer.body.changed && answer.body.changed.length
            ? UNDO_WORDS.done : UNDO_WORDS.unchanged;
          button.remove();
        } else {
          result.textContent = answer.status === 0 ? UNDO_WORDS.offline
            : (answer.body && answer.body.detail) || UNDO_WORDS.failed;
          button.disabled = answer.status === 0 ? false : true;
          if (answer.status !== 0) button.remove();
        }
        const previous = line.nextElementSibling;
        if (previous && previous.classList.contains("outcome-undo-result")) previous.remove();
        line.after(result);
        scrollDown();
      });
    });
    return button;
  }

  // --- assistant bodies: Markdown, or plain text if markdown.js did not load ---------

  const markdown = window.ChatMarkdown || null;

  function showAssistant(body, text) {
    if (markdown) markdown.renderInto(body, text || "");
    else body.textContent = text || "";
  }

  // A body being streamed into: set() the text so far, finish() with the final one.
  function liveBody(body) {
    if (markdown) return markdown.live(body, scrollDown);
    return {
      set: function (value) {
        body.textContent = value;
        scrollDown();
      },
      text: function () {
        return body.textContent;
      },
      finish: function (value) {
        if (value !== undefined && value !== null) body.textContent = value;
      },
    };
  }

  function spokenText(body) {
    return markdown ? markdown.spokenText(body) : body.textContent;
  }

  function addMessage(role, content, memoryStatus) {
    const item = el("li", "message message-" + role);
    item.appendChild(el("span", "message-role", role === "user" ? gettext("You") : gettext("Assistant")));
    const body = el("div", "message-body");
    if (role === "assistant") showAssistant(body, content);
    else body.textContent = content;
    item.appendChild(body);
    const notes = el("div", "message-notes");
    item.appendChild(notes);
    if (memoryStatus && role === "assistant") {
      const line = outcomeLine({ status: memoryStatus, message: "" });
      if (line) notes.appendChild(line);
    } else if (memoryStatus && role === "user" && memoryStatus === "discarded") {
      notes.appendChild(el("p", "outcome outcome-discarded", gettext("This turn did not complete; nothing was saved.")));
    }
    messages.appendChild(item);
    scrollDown();
    return { item: item, body: body, notes: notes };
  }

  function setRunning(turn) {
    running = turn;
    stopButton.disabled = !turn;
    sendButton.disabled = !!turn;
    if (temporaryToggle) temporaryToggle.disabled = !!turn;
  }

  // --- the socket ------------------------------------------------------------

  function connect() {
    const scheme = location.protocol === "https:" ? "wss://" : "ws://";
    socket = new WebSocket(scheme + location.host + root.dataset.socketPath);
    socket.addEventListener("open", function () {
      retryDelay = 500;
      connection.textContent = gettext("Connected.");
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
        connection.textContent = gettext("Closed: this chat is open in too many pages. Reload to use it here.");
        connection.className = "connection down";
        return;
      }
      if (running) {
        running.live.finish();
        running.notes.appendChild(el("p", "outcome outcome-discarded",
          gettext("The connection dropped before the turn completed; nothing was saved.")));
        setRunning(null);
      }
      if (temporary && temporaryId) {
        // The server forgets a temporary chat when its socket closes.
        temporaryId = null;
        addNotice(gettext("The connection dropped, so this temporary chat ended. Your next message starts a new one."));
      }
      connection.textContent = gettext("Disconnected; reconnecting…");
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
        let isNew = false;
        if (frame.temporary) {
          temporaryId = frame.temporary_id || null;
        } else {
          isNew = conversationId !== frame.conversation_id;
          conversationId = frame.conversation_id;
        }
        const bubble = addMessage("assistant", "");
        bubble.item.classList.add("pending");
        bubble.item.setAttribute("aria-busy", "true");
        setRunning({ turnId: frame.turn_id, bubble: bubble.item, body: bubble.body, notes: bubble.notes,
          live: liveBody(bubble.body) });
        if (isNew) loadConversations();
        break;
      }
      case "delta":
        if (!running || frame.turn_id !== running.turnId) break;
        running.live.set((frame.reset ? "" : running.live.text()) + frame.text);
        break;
      case "tool":
        if (!running || frame.turn_id !== running.turnId) break;
        const note = el("p", "tool-note", frame.message);
        if (frame.tool) note.setAttribute("data-tool", frame.tool);
        running.notes.appendChild(note);
        break;
      case "turn_completed":
        if (!running || frame.turn_id !== running.turnId) break;
        running.live.finish(frame.message.content);
        running.bubble.classList.remove("pending");
        running.bubble.removeAttribute("aria-busy");
        if (frame.notice) running.notes.appendChild(el("p", "notice", frame.notice));
        appendOutcome(running.notes, frame.memory);
        // "proposed" (ask before saving, or everything doubted) or "committed" with a doubted part.
        if (frame.memory && frame.memory.proposal_id) {
          showProposal(running.notes, frame.memory.proposal_id);
        }
        noteCapacity(frame.memory);
        showUsage(frame.memory && frame.memory.usage);
        announce(finishedText(spokenText(running.body), frame.memory));
        setRunning(null);
        scrollDown();
        break;
      case "turn_failed":
        if (!running || frame.turn_id !== running.turnId) break;
        running.live.finish(); // what arrived stays, rendered
        running.bubble.classList.remove("pending");
        running.bubble.removeAttribute("aria-busy");
        running.bubble.classList.add("failed");
        running.notes.appendChild(el("p", "error", frame.message));
        // The failure already says nothing was saved: a memory line only when
        // a change had been staged and was dropped (one line, not two, otherwise).
        if (frame.memory && frame.memory.status === "discarded") appendOutcome(running.notes, frame.memory);
        noteCapacity(frame.memory);
        announce(gettext("The reply did not complete.") + " " + (frame.message || ""));
        setRunning(null);
        scrollDown();
        break;
      case "memory_changed":
        refusedForCapacity = false;
        showUsage(frame.usage);
        break;
      case "memory_settings":
        if (typeof frame.use_memory === "boolean") applySettings({ use_memory: frame.use_memory });
        break;
      case "error":
        // A temporary chat the server no longer has (its socket closed): the
        // next message starts a new one.
        if (frame.code === "temporary_chat_gone") temporaryId = null;
        addNotice(frame.message);
        break;
    }
  }

  // What a screen reader hears once a reply is finished: the reply, and what
  // happened to memory when something did.
  function finishedText(content, memory) {
    let text = gettext("Assistant") + ": " + (content || "");
    const quiet = { nothing_to_commit: true, disabled: true };
    if (memory && memory.status && !quiet[memory.status] && memory.message) text += " " + memory.message;
    return text;
  }

  // One memory line per answer: the outcome, once the reply completed, takes
  // the place of the memory tool's progress notes ("1 change ready, saved when
  // this reply completes"); other tools' notes (a search) stay.
  function appendOutcome(notes, memory) {
    const line = outcomeLine(memory);
    if (!line) return;
    notes.querySelectorAll('.tool-note[data-tool="memory_update"]').forEach(function (note) { note.remove(); });
    notes.appendChild(line);
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
      addNotice(interpolate(gettext("The message has %(length)s characters; the limit is %(limit)s."),
        { length: content.length, limit: maxChars }, true));
      return;
    }
    if (!socket || socket.readyState !== WebSocket.OPEN) {
      addNotice(gettext("Not connected yet; wait a moment and send again."));
      return;
    }
    addMessage("user", content);
    const frame = { type: "user_message", content: content, conversation_id: temporary ? null : conversationId };
    if (temporary) {
      frame.temporary = true;
      frame.temporary_id = temporaryId;
    }
    socket.send(JSON.stringify(frame));
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
    let text = interpolate(gettext("%(length)s of %(limit)s characters"),
      { length: length.toLocaleString(pageLanguage), limit: maxChars.toLocaleString(pageLanguage) }, true);
    if (length >= maxChars) {
      text += ": " + (pasteCut ? gettext("the limit. The pasted text was cut to fit.") : gettext("the limit."));
    }
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
        conversationList.appendChild(el("li", "empty", gettext("No conversations yet.")));
        return;
      }
      items.forEach(function (conversation) {
        const item = el("li");
        item.dataset.conversationId = conversation.id;
        if (conversation.id === conversationId) item.classList.add("current");
        item.appendChild(el("button", "conversation-open", conversation.title || gettext("Untitled")));
        const del = el("button", "conversation-delete", "×");
        del.setAttribute("aria-label", gettext("Delete this conversation"));
        del.title = gettext("Delete");
        item.appendChild(del);
        conversationList.appendChild(item);
      });
    }).catch(function () {
      addNotice(gettext("Could not load your conversations; reload the page."));
    });
  }

  function openConversation(id) {
    if (running) return;
    if (temporary) leaveTemporary();
    api(listUrl + id + "/messages/").then(function (items) {
      conversationId = id;
      messages.replaceChildren();
      const shown = items.map(function (message) {
        return { message: message, added: addMessage(message.role, message.content, message.memory_outcome) };
      });
      attachPending(shown);
      loadConversations();
    }).catch(function () {
      addNotice(gettext("Could not open that conversation; it may have been deleted."));
      loadConversations();
    });
  }

  conversationList.addEventListener("click", function (event) {
    const item = event.target.closest("li[data-conversation-id]");
    if (!item) return;
    const id = Number(item.dataset.conversationId);
    if (event.target.classList.contains("conversation-delete")) {
      if (!confirm(gettext("Delete this conversation? This cannot be undone."))) return;
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
    if (temporary) leaveTemporary();
    conversationId = null;
    messages.replaceChildren();
    loadConversations();
    input.focus();
  }

  document.getElementById("new-conversation").addEventListener("click", startNew);
  document.getElementById("delete-all").addEventListener("click", function () {
    if (!confirm(gettext("Delete all your conversations? This cannot be undone. Your memory is not affected."))) return;
    api(listUrl, { method: "DELETE" }).then(startNew);
  });

  // Reopen the newest conversation (the page lists them newest first). A
  // message sent before its history arrives still goes to it; the history is
  // then put above what is already shown.
  // "?conversation=<id>" (a memory entry's "From your chat" link) opens that one instead.
  function reopenLatest() {
    const wanted = Number(new URLSearchParams(location.search).get("conversation"));
    const listed = wanted > 0 ? conversationList.querySelector('li[data-conversation-id="' + wanted + '"]') : null;
    if (wanted > 0 && !listed) {
      openConversation(wanted); // older than the list shows, or gone: openConversation says so
      return;
    }
    const latest = listed || conversationList.querySelector("li[data-conversation-id]");
    if (!latest) return;
    const id = Number(latest.dataset.conversationId);
    conversationId = id;
    latest.classList.add("current");
    api(listUrl + id + "/messages/").then(function (items) {
      if (conversationId !== id) return; // the person moved on meanwhile
      const first = messages.firstChild;
      const shown = items.map(function (message) {
        const added = addMessage(message.role, message.content, message.memory_outcome);
        if (first) messages.insertBefore(added.item, first);
        return { message: message, added: added };
      });
      attachPending(shown);
      scrollDown();
    }).catch(function () {
      if (conversationId === id && !running) startNew();
    });
  }

  // --- ask before saving: a proposed memory change to save or discard -------------------
  //
  // A turn whose outcome is "proposed" saved nothing: its change waits as a
  // proposal (/api/memory/proposals/<id>/). Under the reply it is shown in
  // plain words with Save and Discard, and an Edit box for each added fact.
  // The memory page lists the same proposals under "Waiting for you".

  const PROPOSAL_ACTIONS = {
    add: { user: gettext("Add to your profile"), memory: gettext("Add to your notes") },
    replace: { user: gettext("Change in your profile"), memory: gettext("Change in your notes") },
    remove: { user: gettext("Remove from your profile"), memory: gettext("Remove from your notes") },
  };
  const PROPOSAL_WORDS = {
    saved: gettext("Saved to your memory."),
    unchanged: gettext("Saved; your memory already held this, so nothing changed."),
    discarded: gettext("Discarded; nothing was saved."),
    stale: gettext("Your memory changed since this was proposed, so it no longer applies. Nothing was saved; you can discard it."),
    gone: gettext("This proposed change is no longer waiting: it was saved, discarded or has expired."),
    empty: gettext("Write the fact itself before saving."),
    full: gettext("This does not fit: your memory would be over its limit. Nothing was saved; remove something on your memory page first."),
    failed: gettext("This change could not be saved; nothing was saved. Check the text and try again."),
    offline: gettext("The change could not be sent; nothing was saved. Check your connection and try again."),
    unreadable: gettext("The proposed change could not be shown. Your memory page lists it under \u201cWaiting for you\u201d."),
  };
  const STALE_CODES = { conflict: true, no_match: true, ambiguous_match: true, entry_changed: true,
    replace_duplicate: true };

  // Like api(), but a refusal's JSON body is returned too: {status, body}.
  function apiAnswer(url, options) {
    const settings = Object.assign({ credentials: "same-origin", headers: {} }, options || {});
    settings.headers = Object.assign({ Accept: "application/json" }, settings.headers);
    if (settings.method && settings.method !== "GET") settings.headers["X-CSRFToken"] = csrfToken;
    return fetch(url, settings).then(function (response) {
      if (response.status === 204) return { status: 204, body: null };
      return response.json().catch(function () {
        return null;
      }).then(function (body) {
        return { status: response.status, body: body };
      });
    }, function () {
      return { status: 0, body: null };
    });
  }

  function quoted(text) {
    return "\u201c" + (text || "") + "\u201d";
  }

  function proposalLine(operation) {
    const names = PROPOSAL_ACTIONS[operation.action] || {};
    const label = names[operation.target] || gettext("Change your memory");
    if (operation.action === "replace") return label + ": " + quoted(operation.entry) + " \u2192 " + quoted(operation.content);
    if (operation.action === "remove") return label + ": " + quoted(operation.entry);
    return label + ": " + quoted(operation.content);
  }

  function showProposal(notes, proposalId) {
    const box = el("div", "chat-proposal");
    box.dataset.proposalId = proposalId;
    notes.appendChild(box);
    apiAnswer(proposalsUrl + proposalId + "/").then(function (answer) {
      if (answer.status === 200 && answer.body && Array.isArray(answer.body.operations)) {
        renderProposal(box, answer.body);
      } else {
        box.appendChild(el("p", "proposal-result", answer.status === 404 ? PROPOSAL_WORDS.gone : PROPOSAL_WORDS.unreadable));
      }
      scrollDown();
    });
  }

  function renderProposal(box, proposal) {
    const prefix = "chat-proposal-" + proposal.id;
    box.setAttribute("role", "group");
    box.setAttribute("aria-labelledby", prefix + "-title");
    // Trusted code doubted it (task progress, a chat summary, an edit not asked for): a plain question.
    const doubted = proposal.operations.some(function (operation) { return operation.why; });
    box.appendChild(el("p", doubted ? "proposal-title proposal-question" : "proposal-title visually-hidden",
      doubted ? gettext("Save this to memory?") : gettext("Proposed memory change"))).id = prefix + "-title";
    const list = el("ul", "proposal-ops");
    list.id = prefix + "-ops";
    const edits = [];
    proposal.operations.forEach(function (operation) {
      const item = el("li", "proposal-op");
      item.appendChild(el("span", "proposal-line", proposalLine(operation)));
      if (operation.why) item.appendChild(el("span", "proposal-why", operation.why));
      // The person's own sentence beside an entry that drops their "no": text, never markup.
      if (operation.you_said) item.appendChild(el("span", "proposal-said", operation.you_said));
      if (operation.action === "add") {
        const editId = prefix + "-edit-" + operation.position;
        const toggle = el("button", "proposal-edit-toggle", gettext("Edit"));
        toggle.type = "button";
        toggle.appendChild(el("span", "visually-hidden", " " + gettext("this fact before saving")));
        toggle.setAttribute("aria-expanded", "false");
        toggle.setAttribute("aria-controls", editId);
        const editor = el("div", "proposal-edit");
        editor.id = editId;
        editor.hidden = true;
        const label = el("label", null, gettext("Text to save"));
        label.htmlFor = editId + "-text";
        const field = el("textarea");
        field.id = editId + "-text";
        field.rows = 2;
        field.value = operation.content || "";
        field.setAttribute("aria-describedby", prefix + "-result");
        editor.append(label, field);
        toggle.addEventListener("click", function () {
          const open = editor.hidden;
          editor.hidden = !open;
          toggle.setAttribute("aria-expanded", open ? "true" : "false");
          if (open) field.focus();
        });
        item.append(" ", toggle, editor);
        edits.push({ position: operation.position, original: operation.content || "", field: field });
      }
      list.appendChild(item);
    });
    box.appendChild(list);

    const actions = el("div", "proposal-actions");
    const save = el("button", "proposal-save", gettext("Save"));
    save.type = "button";
    const discard = el("button", "proposal-discard", gettext("Discard"));
    discard.type = "button";
    [save, discard].forEach(function (button) {
      button.setAttribute("aria-describedby", list.id);
    });
    actions.append(save, discard);
    box.appendChild(actions);
    const result = el("p", "proposal-result");
    result.id = prefix + "-result";
    result.tabIndex = -1;
    box.appendChild(result);

    function busy(on) {
      save.disabled = on;
      discard.disabled = on;
      box.setAttribute("aria-busy", on ? "true" : "false");
    }

    // The proposal is settled: no more buttons; the sentence takes the focus.
    function settle(text, className, link) {
      actions.remove();
      box.querySelectorAll(".proposal-edit-toggle, .proposal-edit").forEach(function (node) {
        node.remove();
      });
      tell(text, className, link);
    }

    function tell(text, className, link) {
      result.className = "proposal-result " + (className || "");
      result.replaceChildren(text);
      if (link) {
        const anchor = el("a", null, gettext("See your memory page"));
        anchor.href = memoryUrl;
        result.append(" ", anchor, ".");
      }
      result.focus();
      announce(text);
      scrollDown();
    }

    function refused(answer) {
      const code = (answer.body && answer.body.code) || "";
      if (answer.status === 404) return settle(PROPOSAL_WORDS.gone, "is-bad");
      if (answer.status === 400 && STALE_CODES[code]) {
        // The proposal stays on the server until it is discarded; saving again cannot help.
        save.remove();
        box.querySelectorAll(".proposal-edit-toggle, .proposal-edit").forEach(function (node) {
          node.remove();
        });
        return tell(PROPOSAL_WORDS.stale, "is-bad");
      }
      let text = PROPOSAL_WORDS.failed;
      if (answer.status === 0) text = PROPOSAL_WORDS.offline;
      else if (code === "empty_entry" || code === "invalid_content") text = PROPOSAL_WORDS.empty;
      else if (code === "over_capacity") text = PROPOSAL_WORDS.full;
      tell(text, "is-bad");
    }

    save.addEventListener("click", function () {
      const changed = edits.filter(function (edit) {
        return edit.field.value !== edit.original;
      }).map(function (edit) {
        return { position: edit.position, content: edit.field.value };
      });
      busy(true);
      apiAnswer(proposalsUrl + proposal.id + "/save/", {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify(changed.length ? { edits: changed } : {}),
      }).then(function (answer) {
        busy(false);
        if (answer.status === 200) {
          const didChange = answer.body && answer.body.changed && answer.body.changed.length;
          settle(didChange ? PROPOSAL_WORDS.saved : PROPOSAL_WORDS.unchanged, "is-good", true);
        } else {
          refused(answer);
        }
      });
    });

    discard.addEventListener("click", function () {
      busy(true);
      apiAnswer(proposalsUrl + proposal.id + "/", { method: "DELETE" }).then(function (answer) {
        busy(false);
        if (answer.status === 204) settle(PROPOSAL_WORDS.discarded);
        else refused(answer);
      });
    });
  }

  // A reopened conversation: replies whose change still waits get their Save and Discard back.
  function attachPending(shown) {
    const waiting = shown.filter(function (pair) {
      return pair.message.role === "assistant" && pair.message.memory_outcome === "proposed" && pair.message.turn_id;
    });
    if (!waiting.length) return;
    apiAnswer(proposalsUrl).then(function (answer) {
      const pending = (answer.status === 200 && answer.body && answer.body.proposals) || [];
      waiting.forEach(function (pair) {
        const proposal = pending.find(function (candidate) {
          return candidate.turn_id === pair.message.turn_id;
        });
        if (!proposal || !pair.added.item.isConnected) return;
        const box = el("div", "chat-proposal");
        box.dataset.proposalId = proposal.id;
        pair.added.notes.appendChild(box);
        renderProposal(box, proposal);
      });
    });
  }

  // --- temporary chat ------------------------------------------------------------

  function setTemporaryLook(on) {
    temporary = on;
    temporaryId = null;
    if (temporaryToggle) temporaryToggle.checked = on;
    if (temporaryBanner) temporaryBanner.hidden = !on;
    if (title) title.textContent = on ? gettext("Temporary chat") : gettext("Chat");
    root.classList.toggle("is-temporary", on);
  }

  function enterTemporary() {
    if (running) return;
    setTemporaryLook(true);
    conversationId = null;
    messages.replaceChildren();
    conversationList.querySelectorAll("li.current").forEach(function (item) {
      item.classList.remove("current");
    });
    input.focus();
  }

  function leaveTemporary() {
    // Only the page forgets it here; the server drops it with the socket.
    setTemporaryLook(false);
    messages.replaceChildren();
  }

  if (temporaryToggle) {
    temporaryToggle.addEventListener("change", function () {
      if (running) {
        temporaryToggle.checked = temporary;
        return;
      }
      if (temporaryToggle.checked) {
        enterTemporary();
      } else {
        startNew();
      }
    });
  }

  // --- the person's "Use memory" switch -------------------------------------------

  function renderMemoryLink(useMemory) {
    if (!memoryLink) return;
    const link = el("a", null, useMemory ? gettext("See and correct your memory") : gettext("Your memory page"));
    link.href = memoryUrl;
    memoryLink.replaceChildren(
      (useMemory ? gettext("The assistant remembers a few facts about you.")
        : gettext("You turned memory off: your chats neither read nor change it.")) + " ",
      link, ".");
  }

  function applySettings(settings) {
    if (!memorySwitch || !settings) return;
    if (settings.agent_memory_enabled === false) {
      const row = document.getElementById("use-memory-row");
      if (row) row.hidden = true;
      return;
    }
    memorySwitch.checked = !!settings.use_memory;
    root.dataset.useMemory = settings.use_memory ? "1" : "0";
    renderMemoryLink(!!settings.use_memory);
  }

  if (memorySwitch && settingsUrl) {
    memorySwitch.addEventListener("change", function () {
      const wanted = memorySwitch.checked;
      memorySwitch.disabled = true;
      api(settingsUrl, {
        method: "PUT",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ use_memory: wanted }),
      }).then(applySettings).catch(function () {
        memorySwitch.checked = root.dataset.useMemory !== "0";
        addNotice(gettext("The memory setting could not be changed. Try again in a moment."));
      }).then(function () {
        memorySwitch.disabled = false;
      });
    });
  }

  reopenLatest();
  connect();
  input.focus();
})();
