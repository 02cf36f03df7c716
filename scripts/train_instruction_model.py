"""Train the model `chatcli.history.instructions.kind_of` weighs a sentence's features with.

Reads the **tuning side** of tests/data/instructions (`TUNING_FILES`: the tuning sets,
`tuning.jsonl` to `tuning12.jsonl`, and the first twenty-three held-out sets, retired to the
tuning side after their last measurements; never `heldout24.jsonl` or `heldout25.jsonl`: how the
sets were made is in that directory's README.md), and the later statements of the tuning
side's same-point reversal pairs (`PAIR_FILES`) as `lift` sentences: what says, in any words,
that an earlier rule or value no longer holds. It reads each one with
`chatcli.history.instructions.features`, fits a multinomial logistic regression (classes:
rule, constraint, fact, preference, goal, lift, none; L2-regularised, full-batch gradient
descent from zero with numpy, the dev extra: the same data always gives the same weights)
and writes it to src/chatcli/history/instruction_model.json. Features seen in fewer than
`MIN_COUNT` sentences are left out, and weights are rounded to `DIGITS` digits.

`--cv` first reports a cross-validation that holds out whole source groups (voices, mined
files; a pair's later statement is its own group), as the held-out set holds out its own:
precision and recall of rules and constraints at several rule-mass thresholds
(`_RULE_MASS`). Run:

    PYTHONPATH=src .venv/bin/python scripts/train_instruction_model.py [--cv] [--data DIR]
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from chatcli.history.instructions import features, kind_for

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "instructions"
OUT = ROOT / "src" / "chatcli" / "history" / "instruction_model.json"
CLASSES = ("rule", "constraint", "fact", "preference", "goal", "lift", "none")
MIN_COUNT = 3
L2 = 1.0
STEPS = 1500
RATE = 0.5
SEED = 31
DIGITS = 3
FOLDS = 5
# The tuning side: each held-out set joined it once used up (measured twice, or once and a
# later set written); tests/data/instructions/README.md says when.
TUNING_FILES = (
    *(f"tuning{n}.jsonl" for n in ("", 2, 3, 4, 5, 7, 8, 9, 10, 11, 12)),
    "heldout.jsonl",
    *(f"heldout{n}.jsonl" for n in range(2, 24)),
)
# The tuning side's reversal pairs: their same-point later statements train `lift`.
PAIR_FILES = (
    *(f"reversals-tuning{n}.jsonl" for n in ("", 4, 5, 6, 7, 8, 9, 10, 11, 12)),
    "reversals-heldout.jsonl",
    *(f"reversals-heldout{n}.jsonl" for n in range(2, 24)),
)

Row = dict[str, Any]
Weights = dict[str, list[float]]


def read(data: Path, names: Sequence[str]) -> list[Row]:
    rows: list[Row] = []
    for name in names:
        with (data / name).open(encoding="utf-8") as fh:
            rows += [json.loads(line) for line in fh if line.strip()]
    return rows


def later_statements(data: Path, names: Sequence[str]) -> list[Row]:
    """The later statements of the same-point pairs in `names`, as `lift` sentences, each
    its own source group."""
    return [
        {"id": f"{pair['id']}-later", "text": pair["later"], "lang": pair["lang"]}
        | {"kind": "lift", "group": f"pair:{pair['id']}"}
        for pair in read(data, names)
        if pair["same_point"]
    ]


def _columns(rows: Sequence[Row]) -> tuple[list[str], list[list[int]]]:
    """The features kept (seen in at least `MIN_COUNT` sentences) and each row's columns."""
    seen = Counter(f for row in rows for f in features(row["text"]))
    names = sorted(f for f, n in seen.items() if n >= MIN_COUNT)
    column = {f: i for i, f in enumerate(names)}
    return names, [[column[f] for f in features(row["text"]) if f in column] for row in rows]


def fit(rows: Sequence[Row]) -> tuple[list[float], Weights]:
    """Bias and weights fitted to `rows` (see the module docstring)."""
    names, columns = _columns(rows)
    sparse = _Sparse.of(columns)
    gold = np.zeros((len(rows), len(CLASSES)))
    gold[np.arange(len(rows)), [CLASSES.index(row["kind"]) for row in rows]] = 1.0
    weights = np.zeros((len(names), len(CLASSES)))
    bias = np.zeros(len(CLASSES))
    for _ in range(STEPS):  # bounded: a fixed number of steps
        scores = sparse.times(weights) + bias
        scores -= scores.max(axis=1, keepdims=True)
        chances = np.exp(scores)
        chances /= chances.sum(axis=1, keepdims=True)
        error = chances - gold
        weights -= RATE * (sparse.back(error, len(names)) + L2 * weights) / len(rows)
        bias -= RATE * error.mean(axis=0)
    return bias.tolist(), {f: weights[i].tolist() for i, f in enumerate(names)}


@dataclass(frozen=True, slots=True, kw_only=True)
class _Sparse:
    """Rows of binary features as their columns, for the two products training needs."""

    flat: Any
    row: Any
    starts: Any

    @classmethod
    def of(cls, columns: Sequence[list[int]]) -> _Sparse:
        lengths = [len(cols) for cols in columns]
        if min(lengths) == 0:  # every sentence has a length feature, kept
            raise ValueError("a sentence without a feature kept")
        return cls(
            flat=np.fromiter((c for cols in columns for c in cols), dtype=np.int64),
            row=np.repeat(np.arange(len(columns)), lengths),
            starts=np.cumsum([0, *lengths[:-1]]),
        )

    def times(self, table: Any) -> Any:
        """The rows times `table`: the sum of its rows at each row's columns."""
        return np.add.reduceat(table[self.flat], self.starts, axis=0)

    def back(self, error: Any, width: int) -> Any:
        """The rows transposed times `error` (`width` columns)."""
        spread = error[self.row]
        return np.stack(
            [np.bincount(self.flat, spread[:, j], width) for j in range(error.shape[1])], axis=1
        ).astype(error.dtype)


def _rounded(bias: list[float], weights: Weights) -> tuple[list[float], Weights]:
    """The model as shipped: weights rounded to `DIGITS` digits, features left with none."""
    kept = {
        f: [round(w, DIGITS) for w in ws]
        for f, ws in weights.items()
        if any(abs(w) >= 10**-DIGITS for w in ws)
    }
    return [round(b, DIGITS) for b in bias], kept


def beliefs(bias: Sequence[float], weights: Weights, found: frozenset[str]) -> dict[str, float]:
    scores = list(bias)
    for feature in found:
        for c, w in enumerate(weights.get(feature, ())):
            scores[c] += w
    top = max(scores)
    exps = [math.exp(s - top) for s in scores]
    total = sum(exps)
    return {kind: e / total for kind, e in zip(CLASSES, exps, strict=True)}


THRESHOLDS = (0.25, 0.3, 0.35, 0.4, 0.45, 0.5)


def cross_validate(rows: Sequence[Row]) -> None:
    """Hold out whole source groups in turn, and print the precision and recall of
    `kind_for` (the model and the plain readings, as `kind_of` decides) on each kind, then
    those of rules and constraints at each rule-mass threshold in `THRESHOLDS`."""
    groups = sorted({row["group"] for row in rows} - {"examples"})
    random.Random(SEED).shuffle(groups)
    judged: list[tuple[str, list[str]]] = []
    for fold in range(FOLDS):
        held = set(groups[fold::FOLDS])
        bias, weights = _rounded(*fit([r for r in rows if r["group"] not in held]))
        for row in (r for r in rows if r["group"] in held and r["kind"] != "lift"):
            found = features(row["text"])
            chances = beliefs(bias, weights, found)
            said = [kind_for(found, chances) or "none"]  # at kind_of's own rule mass
            said += [kind_for(found, chances, rule_mass=m) or "none" for m in THRESHOLDS]
            gold = row["kind"]
            judged.append((gold, ["fact" if gold == "goal" and s != "none" else s for s in said]))
    print("| kind | precision | recall |\n|---|---:|---:|")
    for name, kinds in (
        ("rule+constraint", {"rule", "constraint"}),
        ("rule", {"rule"}),
        ("constraint", {"constraint"}),
        ("fact (goals too)", {"fact", "goal"}),
        ("preference", {"preference"}),
        ("none", {"none"}),
    ):
        print(f"| {name} | {_scores(judged, kinds, 0)} |")
    print("\n| rule mass | rule+constraint precision | recall | larger shortfall |")
    print("|---:|---:|---:|---:|")
    for at, mass in enumerate(THRESHOLDS, start=1):
        precision, recall = _rates(judged, {"rule", "constraint"}, at)
        short = max(GOAL[0] - precision, GOAL[1] - recall, 0.0)
        print(f"| {mass} | {precision:.1%} | {recall:.1%} | {short:.1%} |")


# The goal for carried rules and constraints: precision, recall. The rule mass shipped is the
# threshold whose larger shortfall from it is least on the cross-validation.
GOAL = (0.90, 0.95)


def _scores(judged: Sequence[tuple[str, list[str]]], kinds: set[str], at: int) -> str:
    """Precision and recall on `kinds` of the `at`-th decision of each judged sentence."""
    precision, recall = _rates(judged, kinds, at)
    return f"{precision:.1%} | {recall:.1%}"


def _rates(
    judged: Sequence[tuple[str, list[str]]], kinds: set[str], at: int
) -> tuple[float, float]:
    taken = [gold for gold, said in judged if said[at] in kinds]
    hits = sum(1 for gold in taken if gold in kinds)
    total = sum(1 for gold, _ in judged if gold in kinds)
    return hits / max(len(taken), 1), hits / max(total, 1)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--cv", action="store_true", help="cross-validate first")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--files", nargs="+", default=TUNING_FILES)
    parser.add_argument("--pairs", nargs="*", default=PAIR_FILES)
    args = parser.parse_args(argv)
    rows = read(args.data, args.files) + later_statements(args.data, args.pairs)
    if args.cv:
        cross_validate(rows)
    bias, kept = _rounded(*fit(rows))
    model = {
        "about": "chatcli.history.instructions.kind_of's weights; written by "
        "scripts/train_instruction_model.py from tests/data/instructions/"
        + ", ".join([*args.files, *(f"{name} (later statements)" for name in args.pairs)]),
        "classes": list(CLASSES),
        "bias": bias,
        "weights": kept,
    }
    args.out.write_text(json.dumps(model, ensure_ascii=False, sort_keys=True, indent=0) + "\n")
    print(f"wrote {args.out} ({len(kept):,} features)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
