// Streams an answer from the chat endpoint (Server-Sent Events over a POST) into the page.
(function () {
  const form = document.getElementById("ask");
  if (!form) return;
  const messages = document.getElementById("messages");
  const citations = document.getElementById("citations");
  const button = form.querySelector("button[type=submit]");

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
    if (item.page) return "page " + item.page;
    if (item.line_start) return "lines " + item.line_start + "–" + (item.line_end || item.line_start);
    return "";
  }

  function excerptCard(item, n, text, label) {
    const details = document.createElement("details");
    details.className = "citation";
    details.open = true;
    details.dataset.n = String(n);
    const summary = document.createElement("summary");
    summary.textContent = "[" + n + "] " + (item.title || item.document_key) + (label ? " · " + label : "");
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
    const byChunk = Object.fromEntries(hits.map((hit) => [hit.chunk_id, hit]));
    const p = document.createElement("p");
    p.className = "muted";
    p.id = "sources-status";
    p.textContent = status;
    citations.appendChild(p);
    for (const item of items) {
      citations.appendChild(excerptCard(item, item.n, (byChunk[item.chunk_id] || {}).text, label));
    }
  }

  // As soon as retrieval is done: the excerpts the model is reading.
  function showSources(payload) {
    const status = payload.excerpts.length ? "Reading these excerpts…" : "Nothing in the knowledge base matched this question.";
    showExcerpts(status, payload.excerpts, payload.hits, "retrieved");
  }

  function showCitations(done) {
    let status = {
      partial: "Cited excerpts (some sentences are not supported by them, or do not answer the question):",
    }[done.status] || "Cited excerpts:";
    if (!done.citations.length) {
      status = {
        no_evidence: "Nothing in the knowledge base matched this question.",
        not_found: "The retrieved excerpts do not contain the answer, so nothing is cited.",
      }[done.status] || "The answer cites no excerpt.";
    }
    showExcerpts(status, done.citations, done.hits, "cited");
    // Under each cited excerpt, the sentences of it that the answer's claims stand on, verbatim.
    for (const claim of done.claims || []) {
      for (const quote of claim.quotes || []) {
        const card = citations.querySelector('.citation[data-n="' + quote.n + '"]');
        if (!card) continue;
        const support = document.createElement("p");
        support.className = "support";
        support.textContent = "Supports “" + claim.text + "”: “" + quote.text + "”";
        card.insertBefore(support, card.querySelector("blockquote"));
      }
    }
  }

  // The verified answer: one span a sentence; sentences no excerpt supports, or that do not answer the question,
  // are marked as such; under each claim, the excerpt sentence it stands on, verbatim, to check it at a glance.
  function showClaims(text, done) {
    if (!done.claims || !done.claims.length) {
      text.textContent = done.answer;
      return;
    }
    text.replaceChildren();
    done.claims.forEach((claim, i) => {
      const span = document.createElement("span");
      const offTopic = claim.relevant === false && claim.supported !== false;
      span.className = "claim" + (claim.supported === false ? " unsupported" : "") + (offTopic ? " off-topic" : "");
      if (claim.supported === false) {
        span.title = { value: "An excerpt says something close, but not this value.", polarity: "The excerpt it resembles says the opposite." }[claim.problem] || "No retrieved excerpt supports this sentence.";
      } else if (offTopic) {
        span.title = "Supported, but it does not answer the question.";
      }
      const markers = claim.citations.map((n) => "[" + n + "]").join("");
      const end = markers && /[.!?:;]$/.test(claim.text) ? claim.text.slice(-1) : "";
      span.textContent = markers ? claim.text.slice(0, claim.text.length - end.length) + " " + markers + end : claim.text;
      if (i) text.appendChild(document.createTextNode(claim.text.match(/^[-*•]/) ? "\n" : " "));
      text.appendChild(span);
      for (const quote of claim.quotes || []) {
        const evidence = document.createElement("span");
        evidence.className = "evidence";
        evidence.textContent = "[" + quote.n + "] “" + quote.text + "”";
        text.appendChild(evidence);
      }
    });
  }

  function isRefusal(payload) {
    return ["not_found", "no_evidence", "extractive"].includes(payload.status);
  }

  async function ask(event) {
    event.preventDefault();
    const data = new FormData(form);
    const question = (data.get("question") || "").toString().trim();
    if (!question) return;
    bubble("user", question);
    const answer = bubble("assistant", "");
    answer.classList.add("streaming");
    const text = answer.querySelector(".text");
    button.disabled = true;
    form.querySelector("textarea").value = "";
    try {
      const response = await fetch(form.action, { method: "POST", body: data, headers: { "X-CSRFToken": data.get("csrfmiddlewaretoken") } });
      if (!response.ok) throw new Error(await response.text());
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
          } else if (name === "token") {
            text.textContent += payload.delta;
            answer.dataset.tokens = String(Number(answer.dataset.tokens || 0) + 1);
          } else if (name === "done") {
            if (isRefusal(payload)) text.textContent = payload.answer;
            else showClaims(text, payload);
            answer.dataset.status = payload.status;
            const meta = document.createElement("footer");
            meta.className = "meta";
            meta.textContent = (payload.model || "extractive") + " · " + payload.status.replace("_", " ") +
              (payload.ttft_ms ? " · first token " + Math.round(payload.ttft_ms) + " ms" : "") +
              (payload.reason ? " · " + payload.reason : "");
            answer.appendChild(meta);
            showCitations(payload);
            form.querySelector("input[name=session]").value = payload.session;
            document.body.dispatchEvent(new Event("chat-saved"));
          } else if (name === "error") {
            text.textContent = "Sorry, something went wrong: " + payload.detail;
          }
        }
      }
    } catch (error) {
      text.textContent = "Sorry, the answer could not be produced: " + error.message;
    } finally {
      answer.classList.remove("streaming");
      button.disabled = false;
    }
  }

  form.addEventListener("submit", ask);
  form.querySelector("textarea").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey) form.requestSubmit();
  });
})();
