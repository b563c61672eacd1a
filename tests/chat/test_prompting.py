from __future__ import annotations

from chat.prompting import NO_MATCH, PromptExcerpt, build_grounded_history
from knowledge.search.hits import location_label


def _excerpts(n: int) -> list[PromptExcerpt]:
    return [PromptExcerpt(f"Fact number {i}. " * 20, f"doc{i}.md, lines {i}-{i + 9}") for i in range(1, n + 1)]


def test_excerpts_are_numbered_and_labelled_in_rank_order():
    prompt = build_grounded_history("What is fact 2?", _excerpts(3))
    user = prompt.messages[-1]["content"]
    assert (
        user.index("[1] (doc1.md, lines 1-10)") < user.index("[2] (doc2.md, lines 2-11)") < user.index("[3] (doc3.md")
    )


def test_rules_come_first_with_the_grounding_rule_at_the_top():
    prompt = build_grounded_history("q?", _excerpts(1), persona="You answer for the support team.")
    system = prompt.messages[0]
    assert system["role"] == "system"
    assert system["content"].startswith(
        "Only use facts that appear in the excerpts. If the answer is not in them, say so plainly."
    )
    assert system["content"].rstrip().endswith("You answer for the support team.")


def test_exactly_one_user_turn_with_the_question_last():
    prompt = build_grounded_history("  Where is the invoice?  ", _excerpts(2))
    assert [m["role"] for m in prompt.messages] == ["system", "user"]
    assert prompt.messages[1]["content"].endswith("Question: Where is the invoice?")


def test_no_hits_still_makes_a_prompt_that_says_so():
    prompt = build_grounded_history("Anything?", [])
    assert NO_MATCH in prompt.messages[1]["content"] and prompt.excerpts == []


def test_the_context_budget_drops_the_lowest_ranked_excerpts_whole():
    excerpts = _excerpts(5)
    full = build_grounded_history("q?", excerpts)
    words = lambda text: len(text.split())  # noqa: E731
    budget = words(full.messages[0]["content"]) + words(full.messages[1]["content"]) - 100
    prompt = build_grounded_history("q?", excerpts, max_prompt_tokens=budget, count_tokens=words)
    assert 0 < len(prompt.excerpts) < 5 and prompt.dropped == 5 - len(prompt.excerpts)
    assert prompt.excerpts == excerpts[: len(prompt.excerpts)]  # the best ones stay
    user = prompt.messages[1]["content"]
    for excerpt in prompt.excerpts:
        assert excerpt.text.strip() in user  # never truncated mid-excerpt
    assert f"[{len(prompt.excerpts) + 1}]" not in user


def test_location_labels_prefer_pages_then_lines():
    assert location_label(document_key="a.pdf", line_start=None, line_end=None, page=7) == "a.pdf, page 7"
    assert location_label(document_key="a.md", line_start=3, line_end=9, page=None, heading="Install") == (
        "a.md, lines 3-9, Install"
    )


def test_under_load_each_answer_reads_its_share_of_the_excerpt_budget(settings):
    """Issue 62: with other answers waiting for the model (which writes one at a time), each reads its share of the
    excerpt budget, never under 800 characters, so the queue drains faster; off with RAG_ANSWER_SHARE_UNDER_LOAD."""
    from chat.excerpts import context_budget

    settings.RAG_ANSWER_CONTEXT_CHARS, settings.RAG_ANSWER_TTFT_TARGET_S = 2400, 0
    assert context_budget(None) == 2400 and context_budget(None, waiting=1) == 1200
    assert context_budget(None, waiting=3) == 800  # the floor
    settings.RAG_ANSWER_CONTEXT_CHARS = 600
    assert context_budget(None, waiting=2) == 600  # a budget under the floor is not raised
    settings.RAG_ANSWER_CONTEXT_CHARS, settings.RAG_ANSWER_SHARE_UNDER_LOAD = 2400, False
    assert context_budget(None, waiting=3) == 2400
