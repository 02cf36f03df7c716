"""Compaction on a real small model: SmolLM2-135M-Instruct behind llama.cpp's server.

A 135M model asked for a Markdown handoff summary writes a plain answer with none of the
sections, which verification rejects (and auto-compaction then steps aside). Where the server
constrains the answer to a JSON schema, the sections are asked for as a JSON object
(`chatcli.compaction.prompt.summary_schema`): the model fills each field, and the summary
rendered from it passes the same checks.

The server comes from the `smollm2_server` fixture (the real-model fixtures: a llama.cpp
server with the SmolLM2 GGUF, yielding its OpenAI-compatible base URL, with or without the
final `/v1`); without it these tests are skipped. The model samples (the server's own seed),
so the tests assert what the form guarantees, not the model's words.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest

from chatcli.compaction import SUMMARY_SECTIONS, compact, is_summary_message
from chatcli.messages import Message
from chatcli.providers.openai_compat import OpenAICompatible

pytest_plugins = ("tests.servers",)

# A coding session as a user has it: rules, a bug with its exact error, decisions, files.
CONVERSATION = (
    (
        "I am writing a small Python command-line tool, csvstat, that reads CSV files and "
        "prints a summary of each column. Always use the standard library only: no pandas. "
        "Never print the values of columns named password or token.",
        "Understood. I suggest csv.DictReader in csvstat/reader.py, one function per column "
        "type in csvstat/stats.py, and argparse in csvstat/cli.py. For each column we can "
        "print the count, the number of empty cells, and for numeric columns the minimum, "
        "maximum and mean.",
    ),
    (
        "Sounds good. The numeric detection should accept 1,234.5 and -7 but not 12abc. "
        "Write the reader first.",
        "Here is csvstat/reader.py: read_rows(path) opens the file with newline='' and "
        "encoding='utf-8', builds a csv.DictReader and yields each row as a dict. A helper "
        "is_number(text) strips thousands separators and calls float(); it returns False on "
        "ValueError, so 12abc is not a number while 1,234.5 and -7 are.",
    ),
    (
        "The tests fail on an empty file: KeyError: 'name' in test_reader.py line 14.",
        "An empty file has no header, so reader.fieldnames is None and the test's row['name'] "
        "fails. I changed read_rows to return early when fieldnames is None, and the test now "
        "expects an empty list. All 12 tests in tests/test_reader.py pass.",
    ),
    (
        "Next, the stats. Means must be rounded to 2 decimals, and columns over 1,000,000 rows "
        "must not be loaded in memory at once.",
        "csvstat/stats.py keeps running totals per column (count, empties, min, max, sum), so "
        "memory stays constant whatever the number of rows; the mean is rounded with "
        "round(total / count, 2) when printed. Columns named password or token are skipped "
        "before anything is printed, as you asked.",
    ),
    (
        "Good. Now write the docs in README.md: installation, usage and one example.",
        "README.md now has three sections: Installation (pip install -e .), Usage "
        "(csvstat data.csv --columns age,city) and an example run on examples/people.csv with "
        "its output. I have not written the changelog yet.",
    ),
)
LATEST = "Last step: add a --json flag that prints the same summary as JSON."
# What auto-compaction meets: a window most of the way full, here of test output pasted in.
PASTED = "\n".join(
    f"tests/test_stats.py::test_column_{n:03d} PASSED" + (" [slow]" if n % 7 == 0 else "")
    for n in range(1, 101)
)


def session() -> list[Message]:
    messages = [Message.system("You are a careful Python assistant.")]
    for question, answer in CONVERSATION:
        messages += [Message.user(question), Message.assistant(answer)]
    messages += [
        Message.user(f"Here is the full test run:\n{PASTED}"),
        Message.assistant("All 100 tests pass; the slow ones are the million-row columns."),
    ]
    return [*messages, Message.user(LATEST)]


@pytest.fixture
def smollm2(request: pytest.FixtureRequest) -> Iterator[OpenAICompatible]:
    """The adapter as the chat makes it against the SmolLM2 server (its window and the
    server's kind asked of /props)."""
    try:
        url = str(request.getfixturevalue("smollm2_server"))
    except pytest.FixtureLookupError:
        pytest.skip("no smollm2_server fixture here: the real small model is not set up")
    base = url.rstrip("/").removesuffix("/v1") + "/v1"
    model = str(httpx.get(base + "/models").json()["data"][0]["id"])  # the name it serves
    adapter = OpenAICompatible(base, model, environ={}, discover_window=True)
    yield adapter
    adapter.close()


@pytest.mark.llama_server
def test_smollm2_writes_a_summary_that_passes_the_checks(smollm2: OpenAICompatible) -> None:
    assert smollm2.context_window is not None  # read from the server, as the chat does
    assert smollm2.structured_output_supported()
    messages = session()
    started = time.monotonic()
    result = compact(smollm2, messages)  # CannotSummarise here is the failure
    seconds = time.monotonic() - started
    (summary,) = [m for m in result.messages if is_summary_message(m)]
    headings = [s for s in SUMMARY_SECTIONS if f"## {s}\n" in summary.text]
    assert len(headings) >= 5
    assert result.messages[-1] == Message.user(LATEST)  # the latest request, verbatim
    assert result.report.tokens_after < result.report.tokens_before
    print(
        f"SmolLM2 compaction: {seconds:.1f} s, {result.report.calls} call(s), "
        f"{result.report.usage.output_tokens} summary tokens"
    )
