#!/bin/bash
# Answers across languages (issue 52), through the real server: the cross-lingual set's questions (Spanish,
# Portuguese, French, German and Italian over the English corpora; English over aptitude's Spanish manual) and, beside
# them, their English twins, scored by the public answer evaluator (../shared/eval/answer_eval.py: expected phrase,
# answered-wrong, false refusals, citations).
#   bench/crosslingual_answers.sh OUT_DIR [CODE_DIR] [CORPORA_DIR]
# OUT_DIR gets asked.* (the questions as written) and twins.* (the same questions in English). Nothing else should run
# on the machine meanwhile.
set -euo pipefail
HERE="$(cd "$(dirname "$0")/.." && pwd)"
OUT="$(mkdir -p "$1" && cd "$1" && pwd)"
CODE="${2:-$HERE}"
CORPORA="${3:-/srv/bench}"
PY="$HERE/.venv/bin/python"
PORT="${PORT:-8766}"
source "$HERE/bench/_serve.sh"
"$PY" - "$HERE/bench/data/crosslingual/questions.jsonl" "$OUT" <<'PYTHON'
import json, sys
from pathlib import Path
out = Path(sys.argv[2])
rows = [json.loads(line) for line in open(sys.argv[1])]
with open(out / "asked.jsonl", "w") as asked, open(out / "twins.jsonl", "w") as twins:
    for row in rows:
        row["answerable"] = True
        asked.write(json.dumps(row, ensure_ascii=False) + "\n")
        if row.get("en_question"):
            twins.write(json.dumps({**row, "question": row["en_question"], "lang": "en"}, ensure_ascii=False) + "\n")
PYTHON
bench_tenant "$CODE" "$CORPORA" flask-docs click-code es-docs
serve_answers "$OUT"
for set in asked twins; do
  echo "== $set"
  "$PY" "$HERE/../shared/eval/answer_eval.py" --base-url "http://127.0.0.1:$PORT" --api-key "$KEY" --tenant bench \
    --questions "$OUT/$set.jsonl" --endpoints answer --timeout 300 --out "$OUT/$set.answers.jsonl" \
    --json "$OUT/$set.summary.json" | tee "$OUT/$set.table.md" || true
done
