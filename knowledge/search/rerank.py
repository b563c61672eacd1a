"""The packaged cross-encoder (ms-marco-MiniLM-L-12-v2, int8 ONNX): how well a passage answers a question.

It reads the question and the passage together, so it judges relevance rather than topical likeness. Used to
rerank the hybrid search's first candidates (`retrieve(..., rerank=True)`), fused with the hybrid order by
Reciprocal Rank Fusion rather than replacing it (measured: on its own it helps some corpora and hurts others).
A long chunk is read in overlapping windows and scores as its best window, not as its first 256 tokens.
"""

from __future__ import annotations

import threading

import numpy as np

MAX_TOKENS = 256  # 30 ms a pair against 55 at 512, with about the same ranking quality (measured by the issue)
WINDOW_STRIDE = 32  # word pieces two windows of a long chunk share
BATCH = 16


class CrossEncoder:
    def __init__(self, *, threads: int = 1) -> None:
        import onnxruntime
        from tokenizers import Tokenizer

        from inference.packaged import packaged_reranker_files

        model_path, tokenizer_path = packaged_reranker_files()
        self.tokenizer = Tokenizer.from_file(str(tokenizer_path))
        # The shipped tokenizer.json pads every pair to 512 tokens (≈300 ms a pair): pad per batch instead, and
        # cut only the passage, into overlapping windows.
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_length=MAX_TOKENS, stride=WINDOW_STRIDE, strategy="only_second")
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = onnxruntime.InferenceSession(str(model_path), options, providers=["CPUExecutionProvider"])

    def score(self, question: str, passages: list[str]) -> np.ndarray:
        """One logit per passage (higher: more likely to answer the question): its best window's."""
        if not passages:
            return np.zeros(0, dtype=np.float32)
        windows, owner = [], []
        for index, encoding in enumerate(self.tokenizer.encode_batch([(question, p) for p in passages])):
            for window in [encoding, *encoding.overflowing]:
                windows.append(window)
                owner.append(index)
        order = sorted(range(len(windows)), key=lambda w: len(windows[w].ids))  # batches of similar length
        logits = np.empty(len(windows), dtype=np.float32)
        for start in range(0, len(order), BATCH):
            batch = order[start : start + BATCH]
            longest = max(len(windows[w].ids) for w in batch)
            feed = {
                name: np.array([pad(getattr(windows[w], field), longest) for w in batch], dtype=np.int64)
                for name, field in (("input_ids", "ids"), ("attention_mask", "attention_mask"),
                                    ("token_type_ids", "type_ids"))
            }  # fmt: skip
            logits[batch] = self.session.run(None, feed)[0][:, 0]
        best = np.full(len(passages), -np.inf, dtype=np.float32)
        np.maximum.at(best, np.array(owner), logits)
        return best


def pad(values: list[int], length: int) -> list[int]:
    return list(values) + [0] * (length - len(values))  # [PAD] is 0; so are its mask and segment


_reranker: CrossEncoder | None = None
_lock = threading.Lock()


def get_reranker() -> CrossEncoder:
    """One cross-encoder per process, on the threads the embedder uses for queries."""
    global _reranker
    with _lock:
        if _reranker is None:
            from django.conf import settings

            _reranker = CrossEncoder(threads=max(1, settings.RAG_EMBED_THREADS or 2))
        return _reranker
