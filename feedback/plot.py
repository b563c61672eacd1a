"""The evaluation set's figures over time, as an SVG line chart drawn on the server (no script, no library):
one line a metric, one point a run, and a mark between two runs where the model, the index or the curation
changed, so a jump can be read against its cause."""

from __future__ import annotations

from dataclasses import dataclass, field

from feedback.models import EvalRun

WIDTH, HEIGHT = 720, 260
LEFT, RIGHT, TOP, BOTTOM = 44, 60, 16, 40
SERIES_GAP = 2.5  # pixels between two series at the same value
SERIES = (  # metric, label, colour; answered_wrong first: lower is better, and it is the one to watch
    ("answered_wrong", "answered wrong", "#c0392b"),
    ("cite_rel", "relevant citation", "#1f5fbf"),
    ("ans_phrase", "expected phrase", "#2e8b57"),
    ("abstain", "refused when unanswerable", "#8e44ad"),
    ("recall@5", "retrieval recall@5", "#7f8c8d"),
)


@dataclass
class Line:
    metric: str
    label: str
    colour: str
    points: list[tuple[float, float, float]] = field(default_factory=list)  # x, y, value

    @property
    def path(self) -> str:
        return " ".join(f"{x:.1f},{y:.1f}" for x, y, _ in self.points)


@dataclass
class Change:
    x: float
    text: str


@dataclass
class Plot:
    width: int
    height: int
    lines: list[Line]
    changes: list[Change]
    ticks: list[tuple[float, str]]  # x, date label
    grid: list[tuple[float, str]]  # y, value label

    @property
    def legend(self) -> list[Line]:
        return self.lines[::-1]  # in SERIES order (the lines are drawn in reverse)


def _what_changed(before: dict, after: dict) -> str:
    said = []
    models = before.get("model", ""), after.get("model", "")
    if models[0] != models[1] and not any(m.startswith("(") for m in models):  # "(retrieval only)" is no model
        said.append("model")
    if before.get("embedder") != after.get("embedder"):
        said.append("embedder")
    fixes = int(after.get("fixes") or 0) - int(before.get("fixes") or 0)
    if fixes > 0:
        said.append(f"{fixes} curation{'s' if fixes != 1 else ''}")
    elif before.get("index_changed_at") != after.get("index_changed_at") or before.get("live_documents") != after.get(
        "live_documents"
    ):
        said.append("index")
    return ", ".join(said)


def evaluation_plot(runs: list[EvalRun]) -> Plot | None:
    """`runs` oldest first, finished ones only; None when there is nothing to draw."""
    runs = [run for run in runs if run.state == EvalRun.State.DONE and run.metrics]
    if not runs:
        return None
    inner_w, inner_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x_at(i: int) -> float:
        return LEFT + (inner_w * i / (len(runs) - 1) if len(runs) > 1 else inner_w / 2)

    def y_at(value: float) -> float:
        return TOP + inner_h * (1 - value)

    lines = []
    for n, (metric, label, colour) in enumerate(SERIES):
        line = Line(metric, label, colour)
        nudge = (n - len(SERIES) // 2) * SERIES_GAP  # equal values stay visible side by side, not drawn over
        for i, run in enumerate(runs):
            value = run.metrics.get(metric)
            if isinstance(value, int | float):
                line.points.append((x_at(i), y_at(float(value)) + nudge, float(value)))
        if line.points:
            lines.append(line)
    lines.reverse()  # answered wrong, the one to watch, is drawn last: on top
    changes = []
    for i in range(1, len(runs)):
        text = _what_changed(runs[i - 1].context, runs[i].context)
        if text:
            changes.append(Change((x_at(i - 1) + x_at(i)) / 2, text))
    ticks = [(x_at(i), f"{run.created_at:%d %b %H:%M}") for i, run in enumerate(runs)]
    if len(ticks) > 8:  # label at most eight runs, evenly
        step = -(-len(ticks) // 8)
        ticks = ticks[::step]
    grid = [(y_at(v), f"{v:.2f}") for v in (0.0, 0.25, 0.5, 0.75, 1.0)]
    return Plot(WIDTH, HEIGHT, lines, changes, ticks, grid)
