"""`classify_error` against the context-length and output-limit messages that open-source
inference servers state in their source (tests/data/server-source-errors.json).

Each template was read at a file and line of a server's source and rendered with concrete
numbers the way that code formats them. Every rendered example must come out as the template's
kind with exactly the numbers it states (none missed, none invented): as the bare message, with
and without its HTTP status, and as the body the server sends, as text and parsed.
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chatcli.errors import ErrorInfo, ErrorKind, classify_error

DATA: dict[str, Any] = json.loads(
    (Path(__file__).parent / "data" / "server-source-errors.json").read_text()
)
TEMPLATES: list[dict[str, Any]] = DATA["templates"]

# The ErrorInfo fields that hold a number a message states (the HTTP status is not one).
NUMBER_FIELDS = tuple(
    f.name for f in dataclasses.fields(ErrorInfo) if f.type == "int | None" and f.name != "status"
)


def examples() -> list[Any]:
    return [
        pytest.param(template, example, id=f"{template['id']}-{n}")
        for template in TEMPLATES
        for n, example in enumerate(template["examples"], 1)
    ]


def forms(template: dict[str, Any], example: dict[str, Any]) -> Iterator[tuple[str, ErrorInfo]]:
    """The example classified as a library meets it: the message alone, with its status, and
    the body the server sends (text and parsed JSON)."""
    status = example.get("status", template["status"])
    yield "message", classify_error(example["text"])
    if status is not None:
        yield "message with status", classify_error(example["text"], status=status)
    body = example.get("body")
    if body is not None:
        yield "body", classify_error(body, status=status)
        yield "parsed body", classify_error(json.loads(body), status=status)


def stated(info: ErrorInfo) -> dict[str, int]:
    return {f: getattr(info, f) for f in NUMBER_FIELDS if getattr(info, f) is not None}


def test_the_data_is_the_expected_sample() -> None:
    assert Counter(t["server"] for t in TEMPLATES) == {
        "vllm": 13,
        "sglang": 8,
        "ollama": 5,
        "text-generation-inference": 3,
        "llama.cpp": 3,
        "llamafile": 2,
        "localai": 2,
        "tensorrt-llm": 2,
        "lm-studio-mlx-engine": 1,
    }
    assert sum(len(t["examples"]) for t in TEMPLATES) == 86
    assert len({t["id"] for t in TEMPLATES}) == len(TEMPLATES)


@pytest.mark.parametrize("template", TEMPLATES, ids=[t["id"] for t in TEMPLATES])
def test_every_template_names_its_source(template: dict[str, Any]) -> None:
    assert "/" in template["repo"] and template["path"] and template["read_from"]
    assert isinstance(template["line"], int) and template["line"] > 0
    assert template["commit"] or template["release"], "a commit or a release pins the source"
    for place in template["also_at"]:
        path, line = place.rsplit(":", 1)
        assert path and int(line) > 0
    assert template["template"] and template["examples"]
    assert template["kind"] in {k.value for k in ErrorKind}
    for example in template["examples"]:
        assert set(example["numbers"]) <= set(NUMBER_FIELDS)
        if "body" in example:  # the body carries the message as rendered
            assert example["text"] in example["body"]


@pytest.mark.parametrize(("template", "example"), examples())
def test_each_example_is_classified_with_its_numbers(
    template: dict[str, Any], example: dict[str, Any]
) -> None:
    kind = ErrorKind(template["kind"])
    for form, info in forms(template, example):
        assert info.kind is kind, (form, info)
        assert stated(info) == example["numbers"], (form, info)
