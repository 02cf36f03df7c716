"""How often `classify_error` is right on the real error bodies of tests/data/provider-errors.json.

`python benchmarks/classifier_accuracy.py [--ids pe-128..pe-151]` prints, for the records
chosen (all by default), how many the classifier gets right, and lists the ones it gets wrong.
tests/data/README.md keeps these figures batch by batch: each batch of new bodies is measured
BEFORE the rules are touched for it (held-out accuracy), then again after. Without `--ids` it
also prints the same for the messages read in the inference servers' source
(tests/data/server-source-errors.json): templates and examples right, in every form
tests/test_server_source_errors.py classifies them.

A record counts as right when, in each text form a library meets it (the body with its HTTP
status, the body alone, and the parsed JSON body when it is JSON), the kind is right and, for
overflow and output-cap errors, the numbers extracted are exactly the ones the record states
(none missed, none invented). A look-alike must not come out as overflow or output cap, and
must be the specific kind tests/test_error_corpus.py names for it. Stop-reason fragments
(`max_tokens_truncation`) are not errors and are left out. The SDK-exception forms are
tested in tests/test_error_corpus.py; they need a local server, this script does not.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.test_error_corpus import (  # noqa: E402
    NOT_OVERFLOW_KINDS,
    NUMBER_FIELDS,
    RECORDS,
    parsed_body,
    stated_numbers,
)
from tests.test_server_source_errors import TEMPLATES, forms, stated  # noqa: E402

from chatcli.errors import ErrorInfo, ErrorKind, classify_error  # noqa: E402

EXPECTED_KIND = {
    "context_overflow": ErrorKind.CONTEXT_OVERFLOW,
    "output_cap_error": ErrorKind.OUTPUT_CAP,
}


def text_forms(record: dict[str, Any]) -> Iterator[tuple[str, ErrorInfo]]:
    yield "text", classify_error(record["body"], status=record["http_status"])
    yield "text, no status", classify_error(record["body"])
    body = parsed_body(record)
    if body is not None:
        yield "parsed", classify_error(body, status=record["http_status"])


def problems(record: dict[str, Any]) -> list[str]:
    """What is wrong with the classification of `record`, form by form (empty: right)."""
    found = []
    for form, info in text_forms(record):
        if record["kind"] == "not_overflow":
            expected = NOT_OVERFLOW_KINDS.get(record["id"])
            wrong = info.kind in EXPECTED_KIND.values() or (expected and info.kind is not expected)
            if wrong:
                found.append(f"{form}: {info.kind.value} (expected {expected or 'not overflow'})")
            continue
        if info.kind is not EXPECTED_KIND[record["kind"]]:
            found.append(f"{form}: {info.kind.value} ({info.reason})")
            continue
        extracted = {f: getattr(info, f) for f in NUMBER_FIELDS if getattr(info, f) is not None}
        if extracted != stated_numbers(record):
            found.append(f"{form}: numbers {extracted} != {stated_numbers(record)}")
    return found


def selected(spec: str | None) -> list[dict[str, Any]]:
    chosen = [r for r in RECORDS if r["kind"] != "max_tokens_truncation"]
    if spec is None:
        return chosen
    match = re.fullmatch(r"pe-(\d+)\.\.pe-(\d+)", spec)
    if match is None:
        raise SystemExit(f"--ids: expected pe-N..pe-M, got {spec!r}")
    low, high = int(match[1]), int(match[2])
    return [r for r in chosen if low <= int(r["id"].removeprefix("pe-")) <= high]


def server_source_wrong() -> dict[str, list[int]]:
    """The server-source templates with an example misread in some form: id -> example numbers."""
    wrong: dict[str, list[int]] = {}
    for template in TEMPLATES:
        kind = ErrorKind(template["kind"])
        for n, example in enumerate(template["examples"], 1):
            found = forms(template, example)
            if any(i.kind is not kind or stated(i) != example["numbers"] for _, i in found):
                wrong.setdefault(template["id"], []).append(n)
    return wrong


def report_server_source() -> None:
    wrong = server_source_wrong()
    examples = sum(len(t["examples"]) for t in TEMPLATES)
    bad = sum(len(v) for v in wrong.values())
    print(
        f"server source: {len(TEMPLATES) - len(wrong)}/{len(TEMPLATES)} templates,"
        f" {examples - bad}/{examples} examples right"
    )
    for template_id, numbers in wrong.items():
        template = next(t for t in TEMPLATES if t["id"] == template_id)
        print(f"  {template_id} {template['server']} {template['path']}: examples {numbers}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ids", help="a range of record ids, e.g. pe-128..pe-151")
    args = parser.parse_args()
    records = selected(args.ids)
    wrong = {r["id"]: problems(r) for r in records}
    wrong = {k: v for k, v in wrong.items() if v}
    right = len(records) - len(wrong)
    share = right / len(records) if records else 0.0
    print(f"{right}/{len(records)} right ({share:.0%})")
    for record_id, why in wrong.items():
        record = next(r for r in RECORDS if r["id"] == record_id)
        print(f"  {record_id} {record['provider']} {record['kind']}: {'; '.join(why)}")
    if args.ids is None:
        report_server_source()


if __name__ == "__main__":
    main()
