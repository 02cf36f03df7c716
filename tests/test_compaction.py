"""/compact and auto-compaction against a scripted summariser (no network)."""

from __future__ import annotations

import asyncio
import json
from dataclasses import FrozenInstanceError, replace

import pytest

from chatcli.compaction import (
    MAX_MERGE_LEVELS,
    MAX_SUMMARY_RETRIES,
    SUMMARY_HEADER,
    SUMMARY_SECTIONS,
    AutoCompaction,
    CompactionBreaker,
    CompactionReport,
    aauto_compact,
    acompact,
    auto_compact,
    compact,
    extract_instructions,
    is_summary_message,
    should_auto_compact,
)
from chatcli.compaction.prompt import (
    STRUCTURED_PROMPT,
    SYSTEM_PROMPT,
    structured_summary,
    summary_schema,
)
from chatcli.config import CompactionConfig, RecoveryConfig
from chatcli.errors import CannotSummarise, CompactionError, ConfigError
from chatcli.history.carry import Numbering
from chatcli.history.pairing import repair_tool_pairing
from chatcli.history.truncate import apply_recovery_level
from chatcli.messages import Message, Role, ToolCall, Usage
from chatcli.providers.anthropic import Anthropic
from chatcli.providers.base import Request
from chatcli.tokens.estimate import TokenEstimator
from tests.compaction_fakes import (
    ANTHROPIC_RATE_LIMIT_BODY,
    AZURE_RETRY_AFTER_A_DAY_BODY,
    LLAMA_OVERFLOW_BODY,
    LLAMA_SCHEMA_REFUSED_BODY,
    OPENAI_QUOTA_BODY,
    SECTIONS_TEMPLATE,
    HTTPStatusError,
    ScriptedSummarizer,
    StructuredSummarizer,
    agent_session,
    conversation_text,
    faithful_summary,
)
from tests.replay import Scripted, replay_server

RULES = "We are building a parser. Never use tabs for indentation. Always run the tests with -q."


def _with_rules() -> list[Message]:
    return [
        *agent_session(1),
        Message.user(RULES),
        Message.assistant("Noted."),
        *agent_session(5)[1:],
    ]


def _summary(goal: str = "Build a parser.", rules: str = "None.") -> str:
    return SECTIONS_TEMPLATE.format(goal=goal, rules=rules)


# ---------------------------------------------------------------------------- the prompt


def test_the_prompt_asks_for_every_section_and_carries_the_focus() -> None:
    summarizer = ScriptedSummarizer([faithful_summary])
    compact(summarizer, agent_session(), focus="the parser's error handling")
    (request,) = summarizer.requests
    instructions = request.messages[0]
    assert instructions.role is Role.SYSTEM
    positions = [instructions.text.index(f"## {section}") for section in SUMMARY_SECTIONS]
    assert positions == sorted(positions)
    body = conversation_text(request)
    assert "focus on: the parser's error handling" in body
    assert "f0.py" in body and "[calls read_file" in body and "### Tool result (read_file" in body
    assert request.max_tokens == CompactionConfig().summary_tokens
    assert request.settings.response_format is None  # it cannot constrain its output


# ---------------------------------------------------------------------------- structured


def _sections_json(request: Request) -> str:
    """The faithful summary's sections as the JSON object a constrained server returns."""
    text = faithful_summary(request)
    bodies = [part.split("\n", 1)[1].strip() for part in text.split("## ")[1:]]
    return json.dumps(dict(zip(SUMMARY_SECTIONS, bodies, strict=True)), indent=2)


def test_a_server_that_constrains_output_is_asked_for_the_sections_as_json() -> None:
    messages = agent_session()
    messages[1] = Message.user("Never use tabs. " + messages[1].text)
    summarizer = StructuredSummarizer([_sections_json])
    result = compact(summarizer, messages)
    (request,) = summarizer.requests
    assert request.messages[0].text == STRUCTURED_PROMPT
    schema = request.settings.response_format
    assert schema == summary_schema(request.max_tokens or 0)
    assert list(schema["properties"]) == list(SUMMARY_SECTIONS) == schema["required"]
    # Rendered back to the same Markdown the plain prompt asks for: the checks pass.
    (summary,) = [m.text for m in result.messages if is_summary_message(m)]
    positions = [summary.index(f"## {section}\n") for section in SUMMARY_SECTIONS]
    assert positions == sorted(positions)
    assert "Never use tabs." in summary.split("## Explicit instructions and constraints")[1]


@pytest.mark.parametrize("tokens", [64, 256, 1024, 4000, 100_000])
def test_the_schema_keeps_the_whole_object_within_the_summary_tokens(tokens: int) -> None:
    field = summary_schema(tokens)["properties"][SUMMARY_SECTIONS[0]]
    chars = field["maxLength"]
    assert chars >= 80  # room for a sentence, even in a tiny window
    if tokens >= 512:  # two chars a token, keys and punctuation included
        assert len(SUMMARY_SECTIONS) * chars + 400 <= tokens * 2


def test_a_structured_answer_renders_as_the_summary_sections() -> None:
    answer = {
        "Current step": "Writing the docs.",
        "User's goal": " Build a parser. ",
        "Decisions made": ["Keep parser.py", "", "Use csv"],
        "Errors and how they were solved": "",
        "Files and resources touched": None,
    }
    expected = (
        "## User's goal\nBuild a parser.\n\n## Decisions made\n- Keep parser.py\n- Use csv"
        "\n\n## Current step\nWriting the docs."
    )
    assert structured_summary(json.dumps(answer)) == expected
    fenced = f"Here it is:\n```json\n{json.dumps(answer)}\n```"  # a server that ignores it
    assert structured_summary(fenced) == expected
    for text in ("Sorry, I cannot.", "[1, 2]", '{"User\'s goal": "cut off'):
        assert structured_summary(text) is None


def test_a_structured_answer_that_is_no_json_object_is_checked_as_it_is() -> None:
    summarizer = StructuredSummarizer(["Sorry, I cannot summarise this conversation."])
    with pytest.raises(CannotSummarise, match="has 0 of the 7 sections"):
        compact(summarizer, agent_session())


def test_a_server_that_refuses_the_schema_is_asked_again_plainly() -> None:
    refused = HTTPStatusError(400, LLAMA_SCHEMA_REFUSED_BODY)
    summarizer = StructuredSummarizer([refused, faithful_summary])
    result = compact(summarizer, agent_session())
    first, second = summarizer.requests
    assert first.settings.response_format is not None
    assert second.settings.response_format is None and second.messages[0].text == SYSTEM_PROMPT
    assert result.report.calls == 2  # the refused call counts: it may have been billed
    assert "## Current step" in result.messages[1].text


def test_compaction_replaces_the_middle_and_keeps_systems_and_the_last_turns() -> None:
    messages = agent_session(6)
    summarizer = ScriptedSummarizer([faithful_summary])
    result = compact(summarizer, messages)
    view = result.messages
    assert view[0] == messages[0]
    assert is_summary_message(view[1]) and "## Current step" in view[1].text
    assert view[2:] == tuple(messages[-8:])  # the last two user turns, verbatim
    report = result.report
    assert report.summarized == len(messages) - 1 - 8
    assert (report.calls, report.usage, report.model) == (1, summarizer.usage, "summarizer-mini")
    assert report.tokens_after < report.tokens_before
    assert report.tokens_before == TokenEstimator().count(messages)
    assert report.pinned == ()


def test_system_messages_in_the_middle_are_kept_in_order() -> None:
    messages = agent_session(4)
    messages.insert(5, Message.system("Injected context: the repo uses Python 3.11."))
    view = compact(ScriptedSummarizer([faithful_summary]), messages).messages
    systems = [m for m in view if m.role is Role.SYSTEM]
    assert systems == [m for m in messages if m.role is Role.SYSTEM]
    assert view[2].text.startswith(SUMMARY_HEADER)


# ---------------------------------------------------------------------------- verification


# Pinning is what verification does with carrying off; with it on (the default), the carried
# block holds the user's instructions and they need no pin (tests/test_carry.py).
NO_CARRY = RecoveryConfig(carry_pct=0)


def test_verification_pins_the_instructions_the_summary_dropped() -> None:
    summary = _summary(rules="- never use TABS for indentation")  # case and period differ
    result = compact(ScriptedSummarizer([summary]), _with_rules(), recovery_config=NO_CARRY)
    assert result.report.pinned == ("Always run the tests with -q.",)
    text = result.messages[1].text
    assert text.index(summary) < text.index("- Always run the tests with -q.")
    assert "- Never use tabs" not in text  # it survived in the summary: not pinned


def test_a_summarised_latest_request_is_pinned_verbatim() -> None:
    request = "Refactor the parser into three modules and keep the CLI working."
    messages = [Message.system("You are an agent."), Message.user(request)]
    for step in range(8):
        call = ToolCall(id=f"c{step}", name="edit", arguments={"step": step})
        messages += [
            Message.assistant(f"Step {step}.", tool_calls=(call,)),
            Message.tool(call.id, f"edited module {step}\n" * 60),
        ]
    result = compact(ScriptedSummarizer([_summary()]), messages, recovery_config=NO_CARRY)
    assert result.report.pinned == (request,)  # its own instruction is inside it: not twice
    text = result.messages[1].text
    assert text.endswith(f"[The user's latest request, verbatim:]\n{request}")
    tail = result.messages[2:]
    assert tail[0].role is Role.ASSISTANT  # the cut moved inside the long agent turn
    assert not repair_tool_pairing(result.messages).report.changed


def test_a_summary_that_keeps_the_request_needs_no_pin() -> None:
    request = "Refactor the parser into three modules."
    messages = [Message.user(request), *agent_session(3)[2:]]
    result = compact(ScriptedSummarizer([_summary(goal=request.upper())]), messages)
    assert result.report.pinned == ()


def test_pinned_instructions_survive_a_second_compaction() -> None:
    first = compact(ScriptedSummarizer([_summary()]), _with_rules(), recovery_config=NO_CARRY)
    assert len(first.report.pinned) == 2
    later = [*first.messages, *agent_session(3)[1:]]
    second = compact(ScriptedSummarizer([_summary()]), later, recovery_config=NO_CARRY)
    assert second.report.pinned == first.report.pinned
    assert sum(is_summary_message(m) for m in second.messages) == 1


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (RULES, ("Never use tabs for indentation.", "Always run the tests with -q.")),
        ("Please add type hints. The parser is slow.", ("Please add type hints.",)),
        (
            "Can you always check the input? You must not touch main.py",
            ("You must not touch main.py",),
        ),
        (
            "Don’t push to main.\n- use ruff for linting",
            ("Don’t push to main.", "use ruff for linting"),
        ),
        ("Thanks, that looks great!", ()),
        ("Use tabs. Use tabs.", ("Use tabs.",)),
    ],
)
def test_extract_instructions(text: str, expected: tuple[str, ...]) -> None:
    assert extract_instructions(text) == expected


# Each row: a user message and the instructions in it (rules, imperatives, polite requests,
# negations), next to sentences that are not instructions (statements, questions, answers).
MULTILINGUAL = [
    pytest.param(
        "Nunca use tabs para indentação. O parser já está pronto. Sempre rode os testes com -q "
        "antes de fazer commit. Você pode me explicar o erro? Não altere o arquivo main.py.",
        (
            "Nunca use tabs para indentação.",
            "Sempre rode os testes com -q antes de fazer commit.",
            "Não altere o arquivo main.py.",
        ),
        id="pt-rules",
    ),
    pytest.param(
        "Por favor, escreva os comentários em português. Obrigado, ficou ótimo! Evite "
        "dependências novas. Quero que você responda sempre de forma curta. O código não deve "
        "usar variáveis globais.",
        (
            "Por favor, escreva os comentários em português.",
            "Evite dependências novas.",
            "Quero que você responda sempre de forma curta.",
            "O código não deve usar variáveis globais.",
        ),
        id="pt-requests",
    ),
    pytest.param(
        "Nunca uses tabuladores. El parser ya funciona. Siempre ejecuta las pruebas antes de "
        "hacer commit. ¿Puedes revisar el log? No toques el archivo main.py.",
        (
            "Nunca uses tabuladores.",
            "Siempre ejecuta las pruebas antes de hacer commit.",
            "No toques el archivo main.py.",
        ),
        id="es-rules",
    ),
    pytest.param(
        "Por favor, responde en español. No, está bien así. Asegúrate de que el parser acepte "
        "entradas vacías. Quiero que documentes cada función. ¡No borres los tests!",
        (
            "Por favor, responde en español.",
            "Asegúrate de que el parser acepte entradas vacías.",
            "Quiero que documentes cada función.",
            "¡No borres los tests!",
        ),
        id="es-requests",
    ),
    pytest.param(
        "I want you to write the tests first. I want to understand the parser. I'd like you to "
        "keep the answers short. I need you to check the logs before changing anything. The "
        "build is green.",
        (
            "I want you to write the tests first.",
            "I'd like you to keep the answers short.",
            "I need you to check the logs before changing anything.",
        ),
        id="en-requests",
    ),
]


@pytest.mark.parametrize(("text", "expected"), MULTILINGUAL)
def test_instructions_are_found_in_portuguese_spanish_and_english_requests(
    text: str, expected: tuple[str, ...]
) -> None:
    assert extract_instructions(text) == expected


def test_a_portuguese_rule_the_summary_dropped_is_pinned() -> None:
    rule = "Nunca use tabs para indentação."
    messages = [*agent_session(1), Message.user(f"Estamos fazendo um parser. {rule}")]
    messages += [Message.assistant("Entendido."), *agent_session(5)[1:]]
    result = compact(ScriptedSummarizer([_summary()]), messages, recovery_config=NO_CARRY)
    assert result.report.pinned == (rule,)


# ---------------------------------------------------------------------------- transactional


def _assert_unchanged_after_failure(
    reply: object, match: str, error: type[CompactionError] = CannotSummarise
) -> CompactionError:
    messages = agent_session()
    snapshot = list(messages)
    summarizer = ScriptedSummarizer([reply])  # type: ignore[list-item]
    with pytest.raises(error, match=match) as caught:
        compact(summarizer, messages)
    assert messages == snapshot
    assert len(summarizer.requests) == 1
    return caught.value


@pytest.mark.parametrize("reply", ["", "   \n"])
def test_an_empty_summary_is_rejected(reply: str) -> None:
    _assert_unchanged_after_failure(reply, "empty summary")


@pytest.mark.parametrize(
    "reply",
    [
        "zxqv blorf quuxle wibbit frobnik snarg plimb vorzak trindle",
        "ok",
        "ásdf ñmmq ŧrrk ßßß ||| ### ***",
    ],
)
def test_a_nonsense_summary_is_rejected(reply: str) -> None:
    _assert_unchanged_after_failure(reply, "does not read like a summary")


def test_a_summary_larger_than_what_it_replaces_is_rejected() -> None:
    # A failure, but not the model's inability: on a longer conversation it may do better.
    error = _assert_unchanged_after_failure(
        lambda r: _summary(goal=conversation_text(r) * 2), "not smaller", CompactionError
    )
    assert not isinstance(error, CannotSummarise)


@pytest.mark.parametrize(
    "reply",
    [
        "Sorry, I cannot summarise this conversation.",
        "I'm sorry, but I can't help with summarizing the parser conversation above.",
        # A fair summary, but free text: the next assistant needs the handoff's structure.
        "The user is building a parser in parser.py and asked never to use tabs. The failing "
        "test was fixed by handling empty input; the docs are pending.",
    ],
)
def test_a_refusal_or_free_text_is_rejected(reply: str) -> None:
    error = _assert_unchanged_after_failure(reply, "has 0 of the 7 sections")
    assert reply[:40] in str(error)  # the user sees what the model said instead


def test_a_rejected_summary_is_quoted_on_one_line_without_escapes() -> None:
    # Seen with SmolLM2: the error showed the summary's repr, a raw "\n" in the middle.
    reply = "Sure!\n\nHere is what we discussed:\n- the parser\n- the tests"
    error = _assert_unchanged_after_failure(reply, "has 0 of the 7 sections")
    assert '"Sure! Here is what we discussed: - the parser - the tests"' in str(error)
    assert "\\n" not in str(error) and "\n" not in str(error)


def _only_sections(count: int) -> str:
    return "\n".join(f"## {section}\nthe parser, done." for section in SUMMARY_SECTIONS[:count])


def test_a_summary_may_leave_out_two_sections_but_not_three() -> None:
    assert compact(ScriptedSummarizer([_only_sections(5)]), agent_session()).report.calls == 1
    _assert_unchanged_after_failure(_only_sections(4), "has 4 of the 7 sections")


def test_section_headings_are_recognised_in_the_usual_markdown_styles() -> None:
    headings = (
        "# User's goal",
        "**Explicit instructions and constraints:** none.",
        "Decisions made:",
        "1. Files and resources touched",
        "### ERRORS AND HOW THEY WERE SOLVED",
        "__Done and pending__",
        "- Current step",
    )
    summary = "\n".join(f"{line}\nparser.py, done." for line in headings)
    assert compact(ScriptedSummarizer([summary]), agent_session()).report.summary == summary


def test_a_heading_word_inside_a_sentence_is_not_a_section() -> None:
    prose = "\n".join(
        f"We discussed the {section.lower()} at length." for section in SUMMARY_SECTIONS
    )
    _assert_unchanged_after_failure(prose, "has 0 of the 7 sections")


def test_the_prompt_asks_to_keep_the_headings_in_english() -> None:
    summarizer = ScriptedSummarizer([faithful_summary])
    compact(summarizer, agent_session())
    assert "headings exactly as written (in English)" in summarizer.requests[0].messages[0].text


def test_a_view_that_still_does_not_fit_is_rejected() -> None:
    messages = agent_session()
    with pytest.raises(CompactionError, match="still does not fit"):
        compact(
            ScriptedSummarizer([faithful_summary]),
            messages,
            window=200,
            output_reserve=100,  # 100 tokens: less than the summary alone
            summarizer_window=100_000,
        )


def test_an_overflowing_summary_call_is_planned_again_from_the_error() -> None:
    messages = agent_session(12, result_chars=3000)
    # The server's tokenizer counts 4x what chatcli's estimate says: the first call overflows
    # there; its error states the real prompt size and window, and the rest fits.
    server = ScriptedSummarizer(
        [faithful_summary], context_window=8000, estimator=TokenEstimator(chars_per_token=1.0)
    )
    result = compact(server, messages)
    fitting = server.requests[1:]
    assert server.needed_tokens(server.requests[0]) > 8000
    assert len(server.requests) == result.report.calls > 2  # the overflowing call counts too
    assert result.report.usage == sum([server.usage] * len(fitting), Usage())  # it reported none
    assert all(server.needed_tokens(r) <= 8000 for r in fitting)


def test_an_overflow_that_persists_raises_and_changes_nothing() -> None:
    messages = agent_session(12, result_chars=3000)
    snapshot = list(messages)
    server = ScriptedSummarizer([HTTPStatusError(400, LLAMA_OVERFLOW_BODY)])
    with pytest.raises(CompactionError, match="exceeds the available context size") as caught:
        compact(server, messages)
    assert messages == snapshot
    assert len(server.requests) == 2  # one more plan, from the stated window, then it stops
    cause = caught.value.__cause__
    assert isinstance(cause, HTTPStatusError) and cause.body == LLAMA_OVERFLOW_BODY


def test_nothing_to_compact_is_an_error() -> None:
    with pytest.raises(CompactionError, match="nothing to compact"):
        compact(ScriptedSummarizer([faithful_summary]), [Message.system("s"), Message.user("hi")])


def test_failure_with_fallback_uses_the_deterministic_levels() -> None:
    messages = agent_session(10, result_chars=3000)
    summarizer = ScriptedSummarizer([HTTPStatusError(429, ANTHROPIC_RATE_LIMIT_BODY)])
    budget = TokenEstimator().count(messages) // 3
    result = compact(summarizer, messages, window=budget, fallback=True, sleep=_no_wait)
    report = result.report
    assert report.fallback is not None and "rate limit" in report.reason
    level = int(report.fallback.name.split(":")[0].removeprefix("level "))
    assert result.messages == apply_recovery_level(messages, level, RecoveryConfig()).messages
    assert (
        report.tokens_after
        <= budget
        < TokenEstimator().count(
            apply_recovery_level(messages, level - 1, RecoveryConfig()).messages
        )
    )


# ---------------------------------------------------------------------------- retries


def _no_wait(seconds: float) -> None:
    pass


_TRANSIENT = [
    pytest.param(HTTPStatusError(429, ANTHROPIC_RATE_LIMIT_BODY), id="rate-limit-429"),
    pytest.param(TimeoutError("read timed out"), id="timeout"),
    pytest.param(ConnectionResetError(104, "Connection reset by peer"), id="connection-reset"),
]


@pytest.mark.parametrize("error", _TRANSIENT)
def test_a_transient_failure_is_retried_with_backoff(error: Exception) -> None:
    sleeps: list[float] = []
    summarizer = ScriptedSummarizer([error, error, faithful_summary])
    result = compact(summarizer, agent_session(), sleep=sleeps.append)
    assert sleeps == [1.0, 2.0]
    assert len(summarizer.requests) == result.report.calls == 3
    assert len(set(map(repr, summarizer.requests))) == 1  # the same request each time
    assert result.report.usage == summarizer.usage  # only the call that worked reported usage


@pytest.mark.parametrize("error", _TRANSIENT)
def test_retries_are_bounded_then_nothing_changes(error: Exception) -> None:
    messages = agent_session()
    snapshot = list(messages)
    sleeps: list[float] = []
    summarizer = ScriptedSummarizer([error])
    with pytest.raises(CompactionError, match="summary call failed after 2 retries") as caught:
        compact(summarizer, messages, sleep=sleeps.append)
    assert messages == snapshot
    assert caught.value.__cause__ is error
    assert len(summarizer.requests) == caught.value.calls == 1 + MAX_SUMMARY_RETRIES
    assert sleeps == [1.0, 2.0]


def test_a_wait_over_the_bound_ends_the_retries() -> None:
    azure = HTTPStatusError(429, AZURE_RETRY_AFTER_A_DAY_BODY)
    sleeps: list[float] = []
    summarizer = ScriptedSummarizer([TimeoutError("read timed out"), azure, faithful_summary])
    with pytest.raises(CompactionError, match="failed after 1 retry: rate_limit") as caught:
        compact(summarizer, agent_session(), sleep=sleeps.append)
    assert (caught.value.calls, sleeps) == (2, [1.0])


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (OPENAI_QUOTA_BODY, "quota"),  # a 429 that waiting cannot fix
        (AZURE_RETRY_AFTER_A_DAY_BODY, "retry after 86400 seconds"),  # over RETRY_MAX_DELAY
    ],
)
def test_failures_waiting_cannot_fix_are_not_retried(body: str, reason: str) -> None:
    sleeps: list[float] = []
    summarizer = ScriptedSummarizer([HTTPStatusError(429, body), faithful_summary])
    with pytest.raises(CompactionError, match=reason):
        compact(summarizer, agent_session(), sleep=sleeps.append)
    assert (len(summarizer.requests), sleeps) == (1, [])


# Anthropic API reference, "Create a Message", example response (text and usage replaced).
def _anthropic_message(text: str) -> dict[str, object]:
    return {
        "id": "msg_013Zva2CMHLNnXjNJJKqJ2EF",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-20250514",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 2095, "output_tokens": 503},
    }


# The docs' overloaded error (tests/data/sse/anthropic-error.txt), as a 529 with Retry-After.
_OVERLOADED = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}


async def test_the_providers_retry_after_is_honoured_through_the_real_sdk() -> None:
    with replay_server() as server:
        server.add(
            Scripted(status=529, body=_OVERLOADED, headers={"retry-after": "7"}),
            Scripted(body=_anthropic_message(_summary())),
        )
        sleeps: list[float] = []

        async def asleep(seconds: float) -> None:
            sleeps.append(seconds)

        key, url = "sk-ant-test", server.url
        async with Anthropic("claude-sonnet-4-20250514", api_key=key, base_url=url) as provider:
            result = await acompact(provider, agent_session(), asleep=asleep)
    assert sleeps == [7.0] and len(server.requests) == 2
    assert result.report.calls == 2
    assert result.report.usage == Usage(input_tokens=2095, output_tokens=503)


def test_auto_compaction_that_worked_after_a_retry_is_no_strike() -> None:
    messages = agent_session()
    window = TokenEstimator().count(messages) + 50  # over 80%, still fits
    summarizer = ScriptedSummarizer([TimeoutError("read timed out"), faithful_summary])
    breaker = CompactionBreaker().after_failure("earlier")
    outcome = auto_compact(
        summarizer,
        messages,
        breaker=breaker,
        window=window,
        summarizer_window=100_000,
        sleep=_no_wait,
    )
    assert outcome.result is not None and outcome.error is None
    assert outcome.breaker.strikes == 0 and outcome.result.report.calls == 2


# ---------------------------------------------------------------------------- what it cost


def _chunked() -> list[Message]:
    """A middle of 5 chunks in an 8,000-token summariser window (see the chunking tests)."""
    return [*_long_chat(3)[:-1], Message.assistant("ok"), *_long_chat(2)[1:]]


def test_a_failed_call_counts_in_the_report_of_the_fallback() -> None:
    quota = HTTPStatusError(429, OPENAI_QUOTA_BODY)  # not retried: a quota
    summarizer = ScriptedSummarizer([faithful_summary, quota], context_window=8000)
    result = compact(summarizer, _chunked(), window=200_000, summarizer_window=8000, fallback=True)
    assert result.report.fallback is not None and "quota" in result.report.reason
    assert result.report.calls == len(summarizer.requests) == 2
    assert result.report.usage == summarizer.usage  # only the first call reported usage


def test_a_failed_compaction_carries_what_it_spent() -> None:
    quota = HTTPStatusError(429, OPENAI_QUOTA_BODY)
    summarizer = ScriptedSummarizer(
        [faithful_summary, faithful_summary, quota], context_window=8000
    )
    with pytest.raises(CompactionError, match="quota") as caught:
        compact(summarizer, _chunked(), window=200_000, summarizer_window=8000)
    assert (caught.value.calls, caught.value.usage) == (3, summarizer.usage + summarizer.usage)


def test_a_refused_summary_was_still_paid_for() -> None:
    summarizer = ScriptedSummarizer(["zxqv blorf quuxle wibbit frobnik snarg plimb"])
    with pytest.raises(CompactionError, match="does not read like a summary") as caught:
        compact(summarizer, agent_session())
    assert (caught.value.calls, caught.value.usage) == (1, summarizer.usage)


def test_compaction_error_stays_backward_compatible() -> None:
    error = CompactionError("plain")
    assert (str(error), error.calls, error.usage) == ("plain", 0, Usage())


# ---------------------------------------------------------------------------- chunking


def _long_chat(turns: int, chars: int = 12_000) -> list[Message]:
    messages = [Message.system("You are helpful.")]
    for turn in range(turns):
        messages += [
            Message.user(f"Question {turn}: " + "parser grammar rules " * (chars // 21)),
            Message.assistant(f"Answer {turn}: " + "tokens and trees " * (chars // 17)),
        ]
    return messages


def test_a_middle_larger_than_the_window_is_summarised_in_chunks_then_merged() -> None:
    # The middle: 5 messages of 12,000 chars and a short one. One summary call holds ~20,000
    # chars of conversation with an 8,000-token window: 5 chunks (the short one joins the
    # fifth), then one call merges the 5 summaries.
    messages = [*_long_chat(3)[:-1], Message.assistant("ok"), *_long_chat(2)[1:]]
    summarizer = ScriptedSummarizer([faithful_summary], context_window=8000)
    result = compact(summarizer, messages, window=200_000, summarizer_window=8000)
    assert result.report.summarized == 6
    assert len(summarizer.requests) == 5 + 1 == result.report.calls
    for number, request in enumerate(summarizer.requests[:-1], start=1):
        assert f"This is part {number} of 5" in conversation_text(request)
        assert summarizer.needed_tokens(request) <= 8000
    merge = conversation_text(summarizer.requests[-1])
    assert "Merge them into one summary" in merge and "Summary of part 5" in merge
    assert result.report.usage == Usage(input_tokens=6000, output_tokens=1200)


def test_the_same_middle_in_a_large_window_takes_one_call() -> None:
    summarizer = ScriptedSummarizer([faithful_summary], context_window=200_000)
    compact(summarizer, [*_long_chat(3)[:-1], Message.assistant("ok"), *_long_chat(2)[1:]])
    assert len(summarizer.requests) == 1


def test_merging_is_bounded() -> None:
    def verbose(request: Request) -> str:  # as long as max_tokens allows, every time
        return "parser " * ((request.max_tokens or 0) * 4 // 7)

    summarizer = ScriptedSummarizer([verbose], context_window=8000)
    with pytest.raises(CompactionError, match=f"{MAX_MERGE_LEVELS} levels of merging"):
        compact(summarizer, _long_chat(7), window=200_000, summarizer_window=8000)
    # 10 middle messages of one chunk each, then 5 and 3 merge calls (two summaries fit in
    # one call), then 2 summaries are left at the last level: it stops.
    assert len(summarizer.requests) == 10 + 5 + 3
    assert all(summarizer.needed_tokens(r) <= 8000 for r in summarizer.requests)


def test_a_window_too_small_to_summarise_is_an_error_without_a_call() -> None:
    summarizer = ScriptedSummarizer([faithful_summary], context_window=600)
    with pytest.raises(CompactionError, match="too small"):
        compact(summarizer, agent_session())
    assert summarizer.requests == []


def test_a_window_the_overflow_states_too_small_chains_the_providers_error() -> None:
    # Declared large, really 600 tokens: the first call overflows and its error says so.
    messages = agent_session()
    snapshot = list(messages)
    server = ScriptedSummarizer([faithful_summary], context_window=600)
    with pytest.raises(CompactionError, match="too small") as caught:
        compact(server, messages, summarizer_window=100_000)
    assert messages == snapshot and len(server.requests) == 1
    cause = caught.value.__cause__
    assert isinstance(cause, HTTPStatusError) and '"n_ctx":600' in cause.body


def test_a_separate_summarizer_writes_the_summary() -> None:
    main = ScriptedSummarizer(["unused"], context_window=200_000)
    cheap = ScriptedSummarizer([faithful_summary], context_window=8000, model="cheap")
    result = compact(main, _long_chat(4), summarizer=cheap)
    assert main.requests == [] and len(cheap.requests) > 1  # chunked to ITS window
    assert result.report.model == "cheap"


# ---------------------------------------------------------------------------- async


async def test_acompact_gives_the_same_result() -> None:
    messages = _with_rules()
    expected = compact(ScriptedSummarizer([_summary()]), messages)
    assert await acompact(ScriptedSummarizer([_summary()]), messages) == expected


async def test_cancellation_propagates_as_itself() -> None:
    messages = agent_session()
    snapshot = list(messages)
    with pytest.raises(asyncio.CancelledError):
        await acompact(ScriptedSummarizer([asyncio.CancelledError()]), messages)
    assert messages == snapshot


# ---------------------------------------------------------------------------- auto-compaction


@pytest.mark.parametrize(
    ("estimate", "window", "reserve", "pct", "expected"),
    [
        (800, 1100, 100, 80, False),  # exactly 80% of the effective 1,000
        (801, 1100, 100, 80, True),
        (801, 1000, 0, 80, True),
        (501, 1000, 0, 50, True),  # settable down
        (950, 1000, 0, 95, False),  # and up
        (1, 100, 100, 80, True),  # no room at all
    ],
)
def test_should_auto_compact(
    estimate: int, window: int, reserve: int, pct: int, expected: bool
) -> None:
    assert should_auto_compact(estimate, window, reserve, pct) is expected


def _report(before: int, after: int, *, fallback: bool = False) -> CompactionReport:
    dummy = apply_recovery_level([Message.user("x")], 1, RecoveryConfig()).report
    return CompactionReport(
        messages_before=10,
        messages_after=3,
        tokens_before=before,
        tokens_after=after,
        fallback=dummy if fallback else None,
        reason="summary failed" if fallback else "",
    )


def test_the_breaker_opens_after_three_strikes_and_reports_once() -> None:
    breaker = CompactionBreaker()
    for reason in ("rate limit", "timeout"):
        breaker = breaker.after_failure(reason)
        breaker, notice = breaker.take_notice()
        assert not breaker.is_open and notice is None
    opened = breaker.after_compaction(_report(1000, 950))  # freed 5% < 10%
    assert opened.is_open and breaker.strikes == 2  # the old value is untouched
    reported, notice = opened.take_notice()
    assert notice is not None and "3 failed or ineffective" in notice and "5%" in notice
    assert reported.take_notice() == (reported, None)
    with pytest.raises(FrozenInstanceError):
        reported.strikes = 0  # type: ignore[misc]


def test_a_good_compaction_clears_the_strikes_and_a_fallback_is_a_strike() -> None:
    breaker = CompactionBreaker().after_failure("x").after_failure("y")
    assert breaker.after_compaction(_report(1000, 300)).strikes == 0
    assert breaker.after_compaction(_report(1000, 300, fallback=True)).is_open
    assert CompactionBreaker.from_config(CompactionConfig(max_failures=1, min_freed_pct=50)) == (
        CompactionBreaker(max_strikes=1, min_freed_pct=50)
    )


def test_a_rejected_summary_opens_the_breaker_at_once_and_says_what_compact_does() -> None:
    messages = agent_session()
    window = TokenEstimator().count(messages) + 50  # over 80%, still fits
    summarizer = ScriptedSummarizer(["Sorry, I cannot summarise this conversation."])
    breaker, notices = CompactionBreaker(), []
    for _ in range(4):
        outcome = auto_compact(
            summarizer, messages, breaker=breaker, window=window, summarizer_window=100_000
        )
        assert outcome.messages == tuple(messages)
        breaker = outcome.breaker
        notices.append(outcome.notice)
    assert len(summarizer.requests) == 1  # asked once: a model that cannot is not asked again
    assert breaker.is_open and "has 0 of the 7 sections" in breaker.unable
    assert [n is not None for n in notices] == [True, False, False, False]
    notice = notices[0] or ""
    assert "cannot summarise this conversation" in notice
    assert "/compact will not ask it again" in notice


def test_a_rejected_summary_behind_a_fallback_opens_the_breaker_too() -> None:
    report = CompactionReport(
        messages_before=10,
        messages_after=3,
        tokens_before=1000,
        tokens_after=300,
        fallback=apply_recovery_level([Message.user("x")], 2, RecoveryConfig()).report,
        reason="the summary was rejected: it has 0 of the 7 sections",
        cannot_summarise=True,
    )
    breaker = CompactionBreaker().after_compaction(report)
    assert breaker.is_open and breaker.unable == report.reason
    # A fallback after a provider failure is one strike, as before.
    assert (
        CompactionBreaker().after_compaction(replace(report, cannot_summarise=False)).strikes == 1
    )


def test_auto_compaction_says_when_it_starts_compacting() -> None:
    messages = agent_session()
    window = TokenEstimator().count(messages) + 50
    events: list[str] = []
    summarizer = ScriptedSummarizer([lambda r: events.append("summary call") or _summary()])

    def started() -> None:
        events.append("started")

    def run(window: int) -> AutoCompaction:
        return auto_compact(
            summarizer,
            messages,
            breaker=CompactionBreaker(),
            window=window,
            summarizer_window=100_000,
            on_start=started,
        )

    assert run(window * 2).result is None and events == []  # nothing to compact: not started
    outcome = run(window)
    assert outcome.result is not None
    assert events[0] == "started" and events[1:] == ["summary call"] * len(summarizer.requests)


def test_auto_compaction_waits_for_the_threshold() -> None:
    messages = agent_session()
    summarizer = ScriptedSummarizer([faithful_summary])
    estimate = TokenEstimator().count(messages)
    window = estimate * 100 // 80 + 10  # just under 80%
    outcome = auto_compact(summarizer, messages, breaker=CompactionBreaker(), window=window)
    assert outcome.messages == tuple(messages) and outcome.result is None
    assert summarizer.requests == []
    outcome = auto_compact(summarizer, messages, breaker=CompactionBreaker(), window=window - 20)
    assert outcome.result is not None and outcome.messages == outcome.result.messages
    assert outcome.breaker.strikes == 0
    assert len(summarizer.requests) == outcome.result.report.calls > 1  # a small window


def test_auto_compaction_stops_after_three_failures_and_says_so_once() -> None:
    messages = agent_session()
    window = TokenEstimator().count(messages) + 50  # over 80%, still fits
    summarizer = ScriptedSummarizer([HTTPStatusError(429, ANTHROPIC_RATE_LIMIT_BODY)])
    breaker = CompactionBreaker()
    notices = []
    for _ in range(5):
        outcome = auto_compact(
            summarizer,
            messages,
            breaker=breaker,
            window=window,
            summarizer_window=100_000,
            sleep=_no_wait,
        )
        assert outcome.messages == tuple(messages)
        breaker = outcome.breaker
        notices.append(outcome.notice)
    # Each compaction retried its call, then failed; no model call once the breaker is open.
    assert len(summarizer.requests) == 3 * (1 + MAX_SUMMARY_RETRIES)
    assert [n is not None for n in notices] == [False, False, True, False, False]
    assert "rate limit" in (notices[2] or "")


def test_an_open_breaker_over_the_window_falls_back_without_a_call() -> None:
    messages = agent_session(10, result_chars=3000)
    window = TokenEstimator().count(messages) // 2
    summarizer = ScriptedSummarizer([faithful_summary])
    breaker = CompactionBreaker(strikes=3, reported=True)
    outcome = auto_compact(summarizer, messages, breaker=breaker, window=window)
    assert summarizer.requests == []
    assert outcome.result is not None and outcome.result.report.fallback is not None
    assert TokenEstimator().count(outcome.messages) <= window


def test_auto_compaction_over_the_window_falls_back_when_the_summary_fails() -> None:
    messages = agent_session(10, result_chars=3000)
    window = TokenEstimator().count(messages) // 2
    summarizer = ScriptedSummarizer(["zxqv blorf quuxle wibbit frobnik snarg"])
    outcome = auto_compact(summarizer, messages, breaker=CompactionBreaker(), window=window)
    assert outcome.result is not None and outcome.result.report.fallback is not None
    assert "does not read like a summary" in outcome.result.report.reason
    calls = len(summarizer.requests)  # chunked: the window is small
    assert outcome.result.report.calls == calls  # the failed summary was paid for
    assert outcome.result.report.usage == Usage(
        input_tokens=1000 * calls, output_tokens=200 * calls
    )
    # The model could not summarise: it is not asked again in this session.
    assert outcome.breaker.is_open and outcome.breaker.unable and outcome.error is None


async def test_aauto_compact_matches_auto_compact() -> None:
    messages = agent_session()
    window = TokenEstimator().count(messages) * 2  # 50%, over a threshold set at 40%
    config = CompactionConfig(auto_compact_pct=40)
    expected = auto_compact(
        ScriptedSummarizer([faithful_summary]),
        messages,
        breaker=CompactionBreaker(),
        window=window,
        config=config,
    )
    got = await aauto_compact(
        ScriptedSummarizer([faithful_summary]),
        messages,
        breaker=CompactionBreaker(),
        window=window,
        config=config,
    )
    assert got == expected and got.result is not None


# ---------------------------------------------------------------------------- config


def test_compaction_config_from_env() -> None:
    env = {
        "CHATCLI_AUTO_COMPACT_PCT": "65",
        "CHATCLI_COMPACT_KEEP_TURNS": "3",
        "CHATCLI_COMPACT_SUMMARY_TOKENS": "2000",
        "CHATCLI_COMPACT_MIN_FREED_PCT": "0",
        "CHATCLI_COMPACT_MAX_FAILURES": "5",
    }
    assert CompactionConfig.from_env(env) == CompactionConfig(
        auto_compact_pct=65, keep_turns=3, summary_tokens=2000, min_freed_pct=0, max_failures=5
    )
    assert CompactionConfig.from_env({}) == CompactionConfig()


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("CHATCLI_AUTO_COMPACT_PCT", "101"),
        ("CHATCLI_AUTO_COMPACT_PCT", "0"),
        ("CHATCLI_AUTO_COMPACT_PCT", "eighty"),
        ("CHATCLI_COMPACT_KEEP_TURNS", "0"),
        ("CHATCLI_COMPACT_SUMMARY_TOKENS", "-5"),
        ("CHATCLI_COMPACT_MIN_FREED_PCT", "150"),
        ("CHATCLI_COMPACT_MAX_FAILURES", "0"),
    ],
)
def test_bad_compaction_env_values_name_the_variable(name: str, value: str) -> None:
    with pytest.raises(ConfigError, match=name) as caught:
        CompactionConfig.from_env({name: value})
    assert repr(value) in str(caught.value)


def test_bad_compaction_constructor_values_are_rejected() -> None:
    with pytest.raises(ConfigError, match="auto_compact_pct"):
        CompactionConfig(auto_compact_pct=120)


def _over_the_window() -> list[Message]:
    """An agent turn over a 20,000-token window, cut where the tool result must go back to
    the model: an image pasted as a data URL earlier, then the user's latest request, a call
    and its huge result (the tail compaction keeps, so no summary alone can make it fit)."""
    call = ToolCall(id="c1", name="read_log", arguments={"path": "build.log"})
    image = "data:image/png;base64," + "iVBORw0KGgo" * 4000
    return [
        *_long_chat(2, chars=4000),
        Message.user(f"Look at this screenshot {image}"),
        Message.assistant("A red build badge."),
        Message.user("Fix the failing build. Always run the tests with -q."),
        Message.assistant("I will read the log.", (call,)),
        Message.tool("c1", "error line\n" * 30_000),
    ]


def test_a_compaction_over_the_window_is_shrunk_first_and_keeps_the_request() -> None:
    messages = _over_the_window()
    summarizer = ScriptedSummarizer([faithful_summary], context_window=20_000)
    result = compact(summarizer, messages, window=20_000, output_reserve=2000)
    view = result.messages
    assert TokenEstimator().count(view) <= 18_000
    # The latest request and its instruction, verbatim (kept, or pinned beside the summary).
    assert messages[-3].text in "\n".join(m.text for m in view)
    assert view[-1].tool_result is not None and "chars cut for compaction" in view[-1].text
    assert "iVBORw0KGgo" not in " ".join(conversation_text(r) for r in summarizer.requests)
    assert all(summarizer.needed_tokens(r) <= 20_000 for r in summarizer.requests)


def test_a_compaction_under_the_window_is_not_shrunk() -> None:
    messages = _long_chat(3, chars=2000)
    summarizer = ScriptedSummarizer([faithful_summary], context_window=200_000)
    result = compact(summarizer, messages, window=200_000)
    assert result.messages[-1] == messages[-1]
    assert "parser grammar rules " * 90 in conversation_text(summarizer.requests[0])


def _one_huge_request() -> list[Message]:
    """A short exchange, then one request far over a small window: no level shortens it (a
    request's text is never cut by the seed's levels) and level 3 adds its notice."""
    return [
        Message.user("Never push to main. Hello."),
        Message.assistant("Hello."),
        Message.user("here is the log:\n" + "gamma kappa beta epsilon " * 2400),
    ]


def test_a_fallback_that_does_not_shrink_the_view_is_not_applied() -> None:
    # The case seen in the chat: the fallback reported ~15,009 -> ~15,048 tokens, and its
    # view (level 3's notice added, nothing dropped) became the session's.
    messages = _one_huge_request()
    window = TokenEstimator().count(messages) // 4
    summarizer = ScriptedSummarizer(["zxqv blorf quuxle wibbit frobnik snarg"])
    with pytest.raises(CompactionError, match="do not shrink") as caught:
        compact(summarizer, messages, window=window, fallback=True)
    assert caught.value.calls == 1  # the rejected summary was made, and is paid for
    outcome = auto_compact(summarizer, messages, breaker=CompactionBreaker(), window=window)
    assert outcome.result is None and outcome.messages == tuple(messages)
    assert outcome.error is not None and outcome.breaker.strikes == 1


def test_an_open_breaker_does_not_apply_a_fallback_that_grows_the_view() -> None:
    messages = _one_huge_request()
    window = TokenEstimator().count(messages) // 4
    summarizer = ScriptedSummarizer([faithful_summary])
    breaker = CompactionBreaker(strikes=3, reported=True)
    outcome = auto_compact(summarizer, messages, breaker=breaker, window=window)
    assert summarizer.requests == []
    assert outcome.result is None and outcome.messages == tuple(messages)


# ---------------------------------------------------------------------------- numbers


def test_the_summary_header_names_the_replaced_span_by_transcript_numbers() -> None:
    messages = agent_session(6)
    plain = compact(ScriptedSummarizer([faithful_summary]), messages).messages[1].text
    numbered = compact(
        ScriptedSummarizer([faithful_summary]), messages, numbering=Numbering(messages)
    )
    middle = len(messages) - 1 - 8  # the system message and the last two turns are kept
    head = f"the {middle:,} messages before this one"
    assert f"{head} were replaced" in plain  # without numbers: the text it always had
    assert numbered.messages[1].text == plain.replace(head, f"{head} (#2-#{middle + 1})")


def test_a_second_summary_names_the_span_of_the_first_too() -> None:
    transcript = agent_session(6)
    first = compact(ScriptedSummarizer([_summary()]), transcript, numbering=Numbering(transcript))
    assert "(#2-#" in first.messages[1].text
    transcript += agent_session(3)[1:]
    later = [*first.messages, *transcript[len(agent_session(6)) :]]
    # The session's way: its view (a summary and the tail), numbered by the transcript.
    second = compact(ScriptedSummarizer([_summary()]), later, numbering=Numbering(transcript))
    header = second.messages[1].text.split("\n", 1)[0]
    kept = next(i for i, m in enumerate(transcript) if m is second.messages[2])
    assert f"(#2-#{kept})" in header  # the first span and what followed, up to the kept tail
