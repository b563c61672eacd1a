// Streams an answer from the chat endpoint (Server-Sent Events over a POST) into the page.
(function () {
  const form = document.getElementById("ask");
  if (!form) return;
  const messages = document.getElementById("messages");
  const citations = document.getElementById("citations");
  const button = form.querySelector("button[type=submit]");
  const textarea = form.querySelector("textarea");
  const limit = Number(textarea.dataset.limit || 2000);
  const notice = document.getElementById("ask-notice");
  // The page's language (Django's JavaScript catalogue, /jsi18n/, defines gettext, ngettext and interpolate).
  const LANGUAGE = document.documentElement.lang || "en";
  const fmt = (text, values) => interpolate(text, values, true);
  const STATUS_WORDS = {
    answered: gettext("answered"), partial: gettext("partial"), not_verified: gettext("not verified"),
    not_found: gettext("not found"), refused: gettext("refused"), no_model: gettext("no model"), error: gettext("error"),
  };
  const FRESHNESS_WORDS = {
    review_due: gettext("review due"), expired: gettext("expired"), superseded: gettext("superseded"),
    not_yet_valid: gettext("not yet valid"),
  };

  function say(message) {
    notice.textContent = message;
    notice.hidden = !message;
  }

  // Inline Markdown an answer may carry: `code` spans become <code>, never raw backticks. Text only, no HTML.
  function appendInline(parent, text) {
    text.split(/(`[^`\n]+`)/).forEach((part) => {
      if (!part) return;
      if (part.length > 2 && part.startsWith("`") && part.endsWith("`")) {
        const code = document.createElement("code");
        code.textContent = part.slice(1, -1);
        parent.appendChild(code);
      } else {
        parent.appendChild(document.createTextNode(part));
      }
    });
  }

  function bubble(role, text) {
    const hint = document.getElementById("empty-hint");
    if (hint) hint.remove();
    const article = document.createElement("article");
    article.className = "message " + role;
    const body = document.createElement("div");
    body.className = "text";
    body.textContent = text;
    article.appendChild(body);
    messages.appendChild(article);
    article.scrollIntoView({ block: "end" });
    return article;
  }

  function where(item) {
    if (item.page) return fmt(gettext("page %(page)s"), { page: item.page });
    if (item.line_start) return fmt(gettext("lines %(start)s–%(end)s"), { start: item.line_start, end: item.line_end || item.line_start });
    return "";
  }

  function excerptCard(item, n, text, label) {
    const details = document.createElement("details");
    details.className = "citation";
    details.open = true;
    details.dataset.n = String(n);
    const summary = document.createElement("summary");
    summary.textContent = "[" + n + "] " + (item.title || item.document_key) + (label ? " · " + label : "");
    if (item.document_id && form.dataset.readUrl) {  // the whole document, this passage highlighted in it
      const read = document.createElement("a");
      const query = new URLSearchParams({ chunk: item.chunk_id || "" });
      if (item.version) query.set("version", String(item.version));
      read.href = form.dataset.readUrl.replace("DOCUMENT", encodeURIComponent(item.document_id)) + "?" + query.toString() + "#cited";
      read.className = "read-document";
      read.target = "_blank";
      read.rel = "noopener";
      read.textContent = gettext("Open the document");
      summary.append(" ", read);
    }
    const freshness = item.freshness || {};
    if (freshness.status && freshness.status !== "current") {  // not current: say how, and since when
      const badge = document.createElement("span");
      badge.className = "badge freshness-" + freshness.status;
      badge.textContent = FRESHNESS_WORDS[freshness.status] || freshness.status.replace(/_/g, " ");
      badge.title = {
        review_due: fmt(gettext("Due a review since %(date)s: it may be out of date."), { date: freshness.review_by }),
        expired: fmt(gettext("No longer in force: valid until %(date)s."), { date: freshness.valid_until }),
        superseded: fmt(gettext("Replaced by %(document)s."), { document: freshness.superseded_by || gettext("a newer document") }),
        not_yet_valid: fmt(gettext("Not in force until %(date)s."), { date: freshness.valid_from }),
      }[freshness.status] || "";
      summary.append(" ", badge);
    }
    const meta = document.createElement("p");
    meta.className = "muted";
    meta.textContent = [item.document_key, where(item)].filter(Boolean).join(" · ");
    const excerpt = document.createElement("blockquote");
    excerpt.textContent = text || "";
    details.append(summary, meta, excerpt);
    return details;
  }

  // The sources panel: a status line, then one card per excerpt, numbered as the answer cites them.
  function showExcerpts(status, items, hits, label) {
    citations.replaceChildren();
    // A document's versions share their chunk ids: an excerpt is the hit of its own version (a git file's later
    // version shows its own text, not version 1's), or of its chunk when it names no version.
    const key = (item) => item.chunk_id + "@" + (item.version ?? "");
    const byChunk = Object.fromEntries([...hits].reverse().map((hit) => [hit.chunk_id, hit]));
    const byVersion = Object.fromEntries([...hits].reverse().map((hit) => [key(hit), hit]));
    const p = document.createElement("p");
    p.className = "muted";
    p.id = "sources-status";
    p.textContent = status;
    citations.appendChild(p);
    for (const item of items) {
      const hit = byVersion[key(item)] || (item.version == null ? byChunk[item.chunk_id] : null) || {};
      citations.appendChild(excerptCard(item, item.n, item.text || hit.text, label));
    }
  }

  // As soon as retrieval is done: the excerpts the model is reading.
  function showSources(payload) {
    const status = payload.excerpts.length ? gettext("Reading these excerpts…") : gettext("Nothing in the knowledge base matched this question.");
    showExcerpts(status, payload.excerpts, payload.hits, gettext("retrieved"));
  }

  // The answer failed after retrieval: the excerpts stay, their status says what happened.
  function sourcesKept() {
    const status = document.getElementById("sources-status");
    if (status && citations.querySelector(".citation")) status.textContent = gettext("These excerpts were retrieved; no answer was written from them.");
  }

  function showCitations(done) {
    let status = {
      partial: gettext("Cited excerpts (some sentences are not supported by them, or do not answer the question):"),
      not_verified: gettext("Excerpts that may hold the answer (nothing in them was verified as one):"),
    }[done.status] || gettext("Cited excerpts:");
    if (!done.citations.length) {
      status = {
        no_evidence: gettext("Nothing in the knowledge base matched this question."),
        not_found: gettext("No answer could be verified in the retrieved excerpts, so nothing is cited."),
      }[done.status] || gettext("The answer cites no excerpt.");
    }
    showExcerpts(status, done.citations, done.hits, gettext("cited"));
    // Under each cited excerpt, the sentences of it that the answer's claims stand on, verbatim.
    for (const claim of done.claims || []) {
      for (const quote of claim.quotes || []) {
        const card = citations.querySelector('.citation[data-n="' + quote.n + '"]');
        if (!card) continue;
        const support = document.createElement("p");
        support.className = "support";
        support.textContent = fmt(gettext("Supports “%(claim)s”: “%(quote)s”"), { claim: claim.text, quote: quote.text });
        card.insertBefore(support, card.querySelector("blockquote"));
      }
    }
  }

  const LEFT_OUT = {  // knowledge/claims.py PROBLEM_REASONS
    value: gettext("a number or name it states is not in the source text"),
    field: gettext("its value belongs to another column or row of a table"),
    polarity: gettext("the source text says the opposite"),
    time: gettext("the source text says it of another time (a superseded value, or today's offered as an earlier one)"),
  };

  // Why a sentence of the model's is not shown: said in its place, the sentence itself never shown.
  function leftOut(reason) {
    const note = document.createElement("span");
    note.className = "left-out";
    note.textContent = "(" + reason + ")";
    return note;
  }

  // One verified sentence: its text with its markers, then the excerpt sentences it stands on, verbatim.
  function claimNodes(claim) {
    const nodes = [];
    const span = document.createElement("span");
    const offTopic = claim.relevant === false && claim.supported !== false;
    span.className = "claim" + (offTopic ? " off-topic" : "") + (claim.note ? " note" : "");
    if (offTopic) span.title = gettext("Supported, but it does not answer the question.");
    const markers = claim.citations.map((n) => "[" + n + "]").join("");
    let sentence = claim.text;
    const item = sentence.match(/^\s*(?:[-*•]|\d+[.)])\s+/);
    if (item) {  // a list item of the answer: shown as one, without its Markdown marker
      span.classList.add("list-item");
      sentence = sentence.slice(item[0].length);
    }
    const end = markers && /[.!?:;]$/.test(sentence) ? sentence.slice(-1) : "";
    appendInline(span, markers ? sentence.slice(0, sentence.length - end.length) + " " + markers + end : sentence);
    nodes.push(span);
    if (claim.original) {  // shown in the asker's language: the sentence as it was verified, one click away
      const original = document.createElement("details");
      original.className = "original";
      const summary = document.createElement("summary");
      summary.textContent = gettext("As verified");
      original.append(summary, document.createTextNode(claim.original));
      nodes.push(original);
    }
    for (const quote of claim.quotes || []) {
      const evidence = document.createElement("span");
      evidence.className = "evidence";
      evidence.textContent = "[" + quote.n + "] “" + quote.text + "”";
      nodes.push(evidence);
    }
    return nodes;
  }

  function appendClaim(text, claim) {
    if (text.childNodes.length) text.appendChild(document.createTextNode(claim.text.match(/^[-*•]/) ? "\n" : " "));
    text.append(...claimNodes(claim));
  }

  // The verified answer: one span a sentence, the excerpt sentences it stands on under it. A sentence no excerpt
  // supports is not shown: its place says why.
  function showClaims(text, done) {
    if (!done.claims || !done.claims.length) {
      text.textContent = done.answer;
      return;
    }
    text.replaceChildren();
    for (const claim of done.claims) {
      if (claim.problem === "repeat") continue;  // said by the previous answer: kept in the claims, not in the text
      if (claim.supported === false) {
        text.appendChild(leftOut(fmt(gettext("A sentence was left out: %(reason)s"), { reason: LEFT_OUT[claim.problem] || gettext("nothing in the source text says it") })));
      } else {
        appendClaim(text, claim);
      }
    }
  }

  // A refusal that shows where the answer may be: the heading, then each passage verbatim with its excerpt number.
  function showPassages(text, done) {
    text.replaceChildren();
    const lines = done.answer.split("\n");
    appendInline(text, lines[0]);
    for (const passage of done.evidence || []) {
      const quote = document.createElement("span");
      quote.className = "evidence passage";
      quote.textContent = "[" + passage.n + "] “" + passage.text + "”";
      text.appendChild(quote);
    }
  }

  function isRefusal(payload) {
    return ["not_found", "not_verified", "no_evidence", "extractive"].includes(payload.status);
  }

  // The final answer in its bubble: its sentences (or the refusal, or the passages that may hold it), then the
  // status and the time to the first verified sentence. The same for a live answer and a reopened one.
  function renderAnswer(answer, payload) {
    const text = answer.querySelector(".text");
    if (payload.status === "not_verified" && (payload.evidence || []).length) showPassages(text, payload);
    else if (isRefusal(payload)) {
      text.replaceChildren();
      appendInline(text, payload.answer);
    }
    else showClaims(text, payload);
    answer.dataset.status = payload.status;
    answer.dataset.rendered = "1";
    answer.querySelectorAll(":scope > .meta, :scope > .computed").forEach((old) => old.remove());
    const computed = (payload.citations || []).map((c) => c.table).find((t) => t && t.sql);
    if (computed) {  // a computed answer: the query it ran and the rows it stands on, folded away
      const how = document.createElement("details");
      how.className = "computed";
      const summary = document.createElement("summary");
      summary.textContent = gettext("How this was computed");
      const query = document.createElement("pre");
      query.textContent = computed.sql;
      const rows = document.createElement("p");
      rows.className = "muted";
      rows.textContent = computed.evidence || "";
      how.append(summary, query, rows);
      answer.insertBefore(how, answer.querySelector(":scope > .verdict"));
    }
    const meta = document.createElement("footer");
    meta.className = "meta";
    const timings = payload.timings || {};
    meta.textContent = (STATUS_WORDS[payload.status] || payload.status.replace("_", " ")) + (timings.first_verified_ms ? " · " + fmt(gettext("first verified sentence %(seconds)s s"), { seconds: (timings.first_verified_ms / 1000).toFixed(1) }) : "");
    if (timings.first_verified_ms) meta.dataset.firstVerifiedMs = String(timings.first_verified_ms);
    if (timings.generated_ms) meta.dataset.generatedMs = String(timings.generated_ms);
    answer.insertBefore(meta, answer.querySelector(":scope > .verdict"));
    if (form.dataset.admin && (payload.model || payload.reason)) {
      const why = document.createElement("details");
      why.className = "internals";
      const summary = document.createElement("summary");
      summary.textContent = gettext("Details");
      const body = document.createElement("p");
      body.textContent = payload.model ? fmt(gettext("Model: %(model)s"), { model: payload.model }) : gettext("No language model: excerpts only");
      if (payload.reason) {  // the server's own diagnostic, as it wrote it (English), for the admin
        const reason = document.createElement("span");
        reason.lang = "en";
        reason.textContent = payload.reason;
        body.append(" · ", reason);
      }
      why.append(summary, body);
      meta.appendChild(why);
    }
  }

  // A reopened conversation: each kept answer drawn as it was live; its cited excerpts in the Sources panel (the
  // last answer's at first, another's when it is clicked).
  function reopen() {
    let last = null;
    for (const answer of messages.querySelectorAll(".message.assistant[data-payload]")) {
      const node = document.getElementById(answer.dataset.payload);
      if (!node) continue;
      const payload = JSON.parse(node.textContent);
      renderAnswer(answer, payload);
      answer.addEventListener("click", (event) => {
        if (!event.target.closest(".verdict, details")) showCitations(payload);
      });
      last = payload;
    }
    if (last) showCitations(last);
  }

  // While the model writes, nothing of its draft is shown: each sentence appears once it has been checked against
  // the excerpts (with its markers and the sentences it stands on); one that fails is replaced by the reason.
  function progressLine(answer) {
    const line = document.createElement("p");
    line.className = "progress";
    line.setAttribute("aria-live", "polite");
    line.textContent = gettext("Looking for excerpts and starting the model…");
    answer.insertBefore(line, answer.querySelector(".text"));
    return line;
  }

  // 👍 / 👎 under the answer: the server renders the form (chat/partials/_verdict.html), HTMX posts it.
  function verdictForm(answer, answerId) {
    const receipt = document.createElement("p");  // what it rests on, then and now (chat/receipt.html)
    receipt.className = "receipt-link";
    const link = document.createElement("a");
    link.href = form.dataset.receiptUrl.replace("00000000-0000-0000-0000-000000000000", answerId);
    link.textContent = gettext("Receipt");
    receipt.appendChild(link);
    answer.appendChild(receipt);
    const slot = document.createElement("div");
    slot.className = "verdict";
    slot.setAttribute("hx-get", form.dataset.verdictUrl.replace("00000000-0000-0000-0000-000000000000", answerId));
    slot.setAttribute("hx-trigger", "load");
    slot.setAttribute("hx-swap", "outerHTML");
    answer.appendChild(slot);
    if (window.htmx) window.htmx.process(slot);
  }

  // A verdict the server refuses (400) comes back as the form with the reason: show it, as HTMX would not.
  document.body.addEventListener("htmx:beforeSwap", (event) => {
    if (event.detail.xhr.status === 400 && event.detail.target.closest(".verdict")) {
      event.detail.shouldSwap = true;
      event.detail.isError = false;
    }
  });

  function failureText(response, body) {
    const wait = response.headers.get("Retry-After");
    if (response.status === 503) return (body || gettext("The chat model is not available.")) + " " + (wait ? fmt(gettext("Try again in %(seconds)s s."), { seconds: wait }) : gettext("Try again shortly."));
    return body || fmt(gettext("The answer could not be produced (HTTP %(status)s)."), { status: response.status });
  }

  async function ask(event) {
    event.preventDefault();
    const data = new FormData(form);
    const question = (data.get("question") || "").toString().trim();
    if (!question) return;
    if (question.length > limit) {
      say(fmt(gettext("Questions are limited to %(limit)s characters; this one has %(length)s. Shorten it and ask again."), { limit: limit.toLocaleString(LANGUAGE), length: question.length.toLocaleString(LANGUAGE) }));
      return;
    }
    say("");
    bubble("user", question);
    const answer = bubble("assistant", "");
    answer.classList.add("streaming");
    const text = answer.querySelector(".text");
    const progress = progressLine(answer);
    let failed = true;
    button.disabled = true;
    textarea.value = "";
    try {
      let response;
      try {
        response = await fetch(form.action, { method: "POST", body: data, headers: { "X-CSRFToken": data.get("csrfmiddlewaretoken") } });
      } catch (error) {
        throw new Error(gettext("The server could not be reached. Your question is back in the box: ask again in a moment."));
      }
      if (!response.ok) throw new Error(failureText(response, (await response.text()).trim()));
      const reader = response.body.getReader();
      const decoder = new TextDecoder();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        let cut;
        while ((cut = buffer.indexOf("\n\n")) >= 0) {
          const raw = buffer.slice(0, cut);
          buffer = buffer.slice(cut + 2);
          const name = (raw.match(/^event: (.*)$/m) || [])[1];
          const payload = JSON.parse((raw.match(/^data: (.*)$/m) || [])[1] || "{}");
          if (name === "sources") {
            showSources(payload);
            progress.textContent = payload.excerpts.length ? fmt(ngettext("The model is reading %(count)s excerpt; each sentence appears once it is checked…", "The model is reading %(count)s excerpts; each sentence appears once it is checked…", payload.excerpts.length), { count: payload.excerpts.length }) : gettext("Nothing matched.");
          } else if (name === "sentence") {
            if (payload.shown) appendClaim(text, payload.claim);
            else text.appendChild(leftOut(payload.reason));
            answer.dataset.sentences = String(Number(answer.dataset.sentences || 0) + 1);
          } else if (name === "done") {
            failed = false;
            progress.remove();
            renderAnswer(answer, payload);
            showCitations(payload);
            if (payload.answer_id) verdictForm(answer, payload.answer_id);
            form.querySelector("input[name=session]").value = payload.session;
            document.body.dispatchEvent(new Event("chat-saved"));
          } else if (name === "error") {
            throw new Error(payload.detail + (payload.retry_after ? " Try again in " + payload.retry_after + " s." : ""));
          }
        }
      }
      if (failed) throw new Error(gettext("The answer stopped before it was complete. Your question is back in the box: ask again."));
    } catch (error) {
      progress.remove();
      answer.dataset.status = "failed";
      text.textContent = error.message;
      textarea.value = question;  // kept, to ask again
      sourcesKept();
    } finally {
      answer.classList.remove("streaming");
      button.disabled = false;
    }
  }

  reopen();
  form.addEventListener("submit", ask);
  // "Ask again" (the inbox of answers whose ground changed, a receipt): the question comes filled in and is asked.
  if (textarea.dataset.askNow && textarea.value.trim()) {
    history.replaceState(null, "", location.pathname);  // a reload does not ask it once more
    form.requestSubmit();
  }
  textarea.addEventListener("input", () => {
    const length = textarea.value.trim().length;
    say(length > limit ? fmt(gettext("Questions are limited to %(limit)s characters; this one has %(length)s."), { limit: limit.toLocaleString(LANGUAGE), length: length.toLocaleString(LANGUAGE) }) : "");
  });
  textarea.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey) form.requestSubmit();
  });
})();
