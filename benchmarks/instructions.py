"""How well a classifier recognises the user's instructions, on data it was not written from.

`python benchmarks/instructions.py [--set heldout25|heldout24|...|heldout|tuning|...|tuning12]
[--classifier module:function] [--show-errors]` scores a sentence classifier (`text -> kind
or None`, by default `chatcli.history.carry.classify`) on tests/data/instructions/ (how the
data was made, and its label conventions: that directory's README.md). It prints:

- **Sentences**: precision and recall per kind, overall and per language, a "rule+constraint"
  row (a rule taken for a constraint or the reverse still counts: both are carried first), an
  "any instruction" row (carried or not at all), and the confusion table. `None` from the
  classifier is `none`. A classifier that cannot say `goal` is not penalised for it: on a
  `goal` sentence, any carried kind (rule, constraint, fact, preference, goal) counts as
  right. `lift` sentences are left out here: a lift is judged by the reversal pairs below.
- **Pasted lines**: how many rule-like lines of real pasted material (docstrings, READMEs,
  HTML pages, logs, planted prompt injections) the classifier takes for an instruction. Each
  one would be a false carried item.
- **Reversals**: each pair goes through `chatcli.history.carry.carry_instructions(before,
  after)` on a tiny conversation (system; user: first; assistant: "OK."; user: a chatter
  line; assistant: "OK."; user: later; assistant: "OK."; user: a final question), `after`
  keeping only the system message and the final question. A same-point pair passes when the
  later statement is in the resulting view and the first, if it is there, comes before it (the
  model reads the update last). A different-point pair passes when the first is still there
  (the later statement did not replace it). A statement "is there" when its text, whitespace
  collapsed and final punctuation dropped, is a substring of the view's text.

The held-out set measures; never tune on it (the tuning set is for that).
"""

from __future__ import annotations

import argparse
import importlib
import json
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chatcli.history.carry import carry_instructions
from chatcli.messages import Message

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "instructions"

Classifier = Callable[[str], str | None]

KINDS = ("rule", "constraint", "fact", "preference", "goal", "none")
CARRIED = frozenset({"rule", "constraint", "fact", "preference", "goal"})
FIRST_CARRIED = frozenset({"rule", "constraint"})

SYSTEM = "You are a helpful assistant."
CHATTER = {
    "en": "Thanks, let me check the logs on my side.",
    "pt": "Valeu, deixa eu olhar os logs aqui.",
    "es": "Gracias, déjame mirar los logs por mi lado.",
}
QUESTION = {
    "en": "What should we do next?",
    "pt": "O que a gente faz agora?",
    "es": "¿Qué hacemos ahora?",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Scored:
    """One sentence: its gold kind, language and the kind the classifier gave, as scored."""

    text: str
    lang: str
    gold: str
    predicted: str


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def load_classifier(spec: str) -> Classifier:
    module, _, name = spec.partition(":")
    function: Classifier = getattr(importlib.import_module(module), name)
    return function


def scored_kind(gold: str, raw: str | None) -> str:
    """The classifier's answer as scored: None is `none`; any carried kind is right on a goal."""
    predicted = raw if raw is not None else "none"
    if gold == "goal" and predicted in CARRIED:
        return "goal"
    return predicted


def score(rows: Iterable[dict[str, Any]], classify: Classifier) -> list[Scored]:
    return [
        Scored(
            text=row["text"],
            lang=row["lang"],
            gold=row["kind"],
            predicted=scored_kind(row["kind"], classify(row["text"])),
        )
        for row in rows
        if row["kind"] != "lift"
    ]


def precision_recall(
    items: Sequence[Scored], kinds: frozenset[str]
) -> tuple[float | None, float | None, int]:
    """Precision and recall of "is one of `kinds`" (None: no case), and the gold support."""
    hits = sum(1 for i in items if i.gold in kinds and i.predicted in kinds)
    said = sum(1 for i in items if i.predicted in kinds)
    support = sum(1 for i in items if i.gold in kinds)
    return (hits / said if said else None, hits / support if support else None, support)


def cell(value: float | None) -> str:
    return "–" if value is None else f"{value:.0%}"


def pr_cell(items: Sequence[Scored], kinds: frozenset[str]) -> str:
    precision, recall, support = precision_recall(items, kinds)
    return f"{cell(precision)} / {cell(recall)} ({support})"


def pr_rows() -> list[tuple[str, frozenset[str]]]:
    rows = [(kind, frozenset({kind})) for kind in KINDS]
    return [*rows, ("rule+constraint", FIRST_CARRIED), ("any instruction", CARRIED)]


def sentence_table(items: Sequence[Scored]) -> list[str]:
    langs = sorted({i.lang for i in items}, key=("en", "pt", "es").index)
    head = "| kind | all | " + " | ".join(langs) + " |"
    lines = ["Cells: precision / recall (gold support).", "", head]
    lines.append("|---" * (len(langs) + 2) + "|")
    for name, kinds in pr_rows():
        by_lang = [pr_cell([i for i in items if i.lang == lang], kinds) for lang in langs]
        cells = [pr_cell(items, kinds), *by_lang]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def confusion_table(items: Sequence[Scored]) -> list[str]:
    extra = sorted({i.predicted for i in items} - set(KINDS))
    columns = list(KINDS) + extra
    counts = Counter((i.gold, i.predicted) for i in items)
    lines = ["| gold \\ predicted | " + " | ".join(columns) + " |"]
    lines.append("|---" * (len(columns) + 1) + "|")
    for gold in KINDS:
        row = [str(counts[(gold, p)]) if counts[(gold, p)] else "·" for p in columns]
        lines.append(f"| {gold} | " + " | ".join(row) + " |")
    return lines


def error_lines(items: Sequence[Scored]) -> list[str]:
    wrong = [i for i in items if i.gold != i.predicted]
    return [f"- [{i.lang}] {i.gold} → {i.predicted}: {i.text}" for i in wrong]


def share(part: int, whole: int) -> str:
    return f"{part} ({part / whole:.0%})" if whole else "0"


def pasted_table(rows: Sequence[dict[str, Any]], classify: Classifier) -> list[str]:
    taken: Counter[str] = Counter()
    total: Counter[str] = Counter()
    for row in rows:
        total[row["origin"]] += 1
        if classify(row["text"]) is not None:
            taken[row["origin"]] += 1
    lines = ["| origin | lines | taken for an instruction |", "|---|---|---|"]
    for origin in sorted(total):
        lines.append(f"| {origin} | {total[origin]} | {share(taken[origin], total[origin])} |")
    lines.append(f"| all | {total.total()} | {share(taken.total(), total.total())} |")
    return lines


def conversation(pair: dict[str, Any]) -> tuple[list[Message], list[Message]]:
    """The tiny conversation a reversal pair is planted in, and the view after messages went."""
    lang = pair["lang"]
    question = Message.user(QUESTION[lang])
    before = [
        Message.system(SYSTEM),
        Message.user(pair["first"]),
        Message.assistant("OK."),
        Message.user(CHATTER[lang]),
        Message.assistant("OK."),
        Message.user(pair["later"]),
        Message.assistant("OK."),
        question,
    ]
    return before, [before[0], question]


def normalised(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def position(view: str, statement: str) -> int:
    return view.find(normalised(statement).rstrip(".!?"))


# Where this benchmark splits a later message into sentences (its own rule, not chatcli's).
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def statement_position(view: str, message: str) -> int:
    """Where a later message's statements are in the view: where its first one is, if every
    sentence of it that is not a question is there (-1: not). A pair may add a question
    or a second point to the later message ("... so politics is back on the table for us.
    Can you also book the studio for Thursday?"): the question is an ask of the moment, and
    each statement may be carried on its own line."""
    said = [s for s in _SENTENCE_END.split(normalised(message)) if not s.endswith("?")]
    found = [position(view, s) for s in said or [message]]
    return -1 if min(found) < 0 else min(found)


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """A reversal pair after carry_instructions: where each statement is in the view (-1: not)."""

    pair: dict[str, Any]
    first_at: int
    later_at: int

    @property
    def passed(self) -> bool:
        if self.pair["same_point"]:
            return self.later_at >= 0 and (self.first_at < 0 or self.first_at < self.later_at)
        return self.first_at >= 0


def reversal_outcome(pair: dict[str, Any]) -> Outcome:
    before, after = conversation(pair)
    result = carry_instructions(before, after)
    view = normalised("\n".join(m.text for m in result.messages))
    return Outcome(
        pair=pair,
        first_at=position(view, pair["first"]),
        later_at=statement_position(view, pair["later"]),
    )


def where(found: int) -> str:
    return "yes" if found >= 0 else "no"


def reversal_summary(outcomes: Sequence[Outcome]) -> list[str]:
    lines = ["| pairs | lang | passed |", "|---|---|---|"]
    for same in (True, False):
        label = "same point" if same else "different point"
        for lang in ("en", "pt", "es", "all"):
            chosen = [
                o
                for o in outcomes
                if o.pair["same_point"] is same and lang in ("all", o.pair["lang"])
            ]
            passed = sum(1 for o in chosen if o.passed)
            lines.append(f"| {label} | {lang} | {passed}/{len(chosen)} |")
    return lines


def reversal_rows(outcomes: Sequence[Outcome]) -> list[str]:
    lines = [
        "| id | same point | relation | first in view | later in view | pass |",
        "|---|---|---|---|---|---|",
    ]
    for o in outcomes:
        same = str(o.pair["same_point"]).lower()
        cells = [o.pair["id"], same, o.pair["relation"], where(o.first_at), where(o.later_at)]
        lines.append("| " + " | ".join(cells) + f" | {'✓' if o.passed else '✗'} |")
    return lines


def reversal_tables(pairs: Sequence[dict[str, Any]]) -> list[str]:
    outcomes = [reversal_outcome(pair) for pair in pairs]
    return [*reversal_summary(outcomes), "", *reversal_rows(outcomes)]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    heldout = [f"heldout{n}" for n in range(25, 1, -1)] + ["heldout"]
    sets = [*heldout, "tuning", *(f"tuning{n}" for n in (2, 3, 4, 5, 7, 8, 9, 10, 11, 12))]
    parser.add_argument("--set", choices=sets, default="heldout24")
    parser.add_argument("--classifier", default="chatcli.history.carry:classify")
    parser.add_argument("--show-errors", action="store_true", help="list every misjudged sentence")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    classify = load_classifier(args.classifier)
    items = score(read_jsonl(DATA / f"{args.set}.jsonl"), classify)
    pasted = [r for r in read_jsonl(DATA / "pasted-lines.jsonl") if r["set"] == args.set]
    pair_file = DATA / f"reversals-{args.set}.jsonl"  # the later tuning sets have none
    pairs = read_jsonl(pair_file) if pair_file.exists() else []
    title = f"# Instruction recognition, {args.set} set, classifier {args.classifier}"
    out = [title, "", "## Sentences", "", *sentence_table(items), ""]
    out += ["Confusion (rows: gold; columns: as scored):", "", *confusion_table(items)]
    if args.show_errors:
        out += ["", "Misjudged:", "", *error_lines(items)]
    out += ["", "## Pasted lines (each one taken is a false carried item)", ""]
    out += [*pasted_table(pasted, classify), "", "## Reversals through carry_instructions", ""]
    out += reversal_tables(pairs)
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
