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

  function showCitations(done) {
    citations.replaceChildren();
    const byChunk = Object.fromEntries(done.hits.map((hit) => [hit.chunk_id, hit]));
    let shown = done.citations;
    if (!shown.length) {
      const p = document.createElement("p");
      p.className = "muted";
      if (done.status === "no_evidence" || !done.hits.length) {
        p.textContent = "Nothing in the knowledge base matched this question.";
        citations.appendChild(p);
        return;
      }
      // The model cited nothing: show what retrieval found, labelled as such, so staff can check.
      p.textContent = "The answer cites no excerpt. Retrieved, not cited:";
      citations.appendChild(p);
      shown = done.hits.slice(0, 3).map((hit, i) => ({ ...hit, n: "·" }));
    }
    for (const citation of shown) {
      const hit = byChunk[citation.chunk_id] || {};
      const details = document.createElement("details");
      details.className = "citation";
      details.open = true;
      const summary = document.createElement("summary");
      summary.textContent = "[" + citation.n + "] " + (citation.title || citation.document_key);
      const meta = document.createElement("p");
      meta.className = "muted";
      meta.textContent = [citation.document_key, where(citation)].filter(Boolean).join(" · ");
      const excerpt = document.createElement("blockquote");
      excerpt.textContent = hit.text || "";
      details.append(summary, meta, excerpt);
      citations.appendChild(details);
    }
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
          if (name === "token") {
            text.textContent += payload.delta;
            answer.dataset.tokens = String(Number(answer.dataset.tokens || 0) + 1);
          } else if (name === "done") {
            text.textContent = payload.answer;
            const meta = document.createElement("footer");
            meta.className = "meta";
            meta.textContent = (payload.model || "extractive") + (payload.ttft_ms ? " · first token " + Math.round(payload.ttft_ms) + " ms" : "");
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
