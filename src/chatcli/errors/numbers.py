"""The numbers an error message states (prompt tokens, context limit, requested output, ...),
read with one table of templates. `classify_error` reads them for the kinds whose recovery
uses them: a context overflow and an output cap.

A template is a regex where `{field}` is a number captured into that `ErrorInfo` field and a
space matches any run of whitespace (servers pad their messages unpredictably).
`{output_limit_excl}` is an exclusive upper bound (Vertex), stored minus one.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["NUMBER", "NUMBER_KEYS", "numbers_in"]

# A number as providers print it: 200000, 200,000 or 200_000.
NUMBER: Final = r"\d{1,3}(?:[,_]\d{3})+|\d+"

_NUMBER_TEMPLATES: Final = (
    r"{prompt_tokens} \+ {max_tokens} > {limit}",  # Anthropic "199759 + 8192 > 200000"
    # OpenAI, Azure, vLLM, DeepSeek, FastChat; "... maximum context length of N tokens" (SGLang).
    r"maximum context length (?:is|of) {limit}",
    r"(?:messages|prompt) resulted in {~}{prompt_tokens} tokens",
    r"you requested {requested_tokens} tokens \({prompt_tokens} (?:in|for) (?:the messages"
    r"|your prompt)[;,] {max_tokens} (?:in|for) the completion\)",
    r"too large: {max_tokens}",  # "max_tokens is too large: 8192"
    # SGLang: "You requested a total of N tokens: P tokens from the input messages and M tokens
    # for the completion."
    r"total of {requested_tokens} tokens: {prompt_tokens} tokens from the input messages and"
    r" {max_tokens} tokens for the completion",
    # Parts of the above when the breakdown differs ("... 730 in the functions, and 800 in
    # the completion)", OpenAI) or is missing (vLLM, OpenRouter "about N tokens (N of text
    # input)"): the sum, and the completion, each on its own.
    r"you requested {~}{requested_tokens} tokens",
    r"(?:,|\band) {max_tokens} (?:in|for) the completion\)",
    r"\({prompt_tokens} of text input\)",
    r"your request has {prompt_tokens} input tokens",  # vLLM max_tokens validation
    r"you requested {max_tokens} output tokens",  # newest vLLM wording
    r"prompt contains {~}{prompt_tokens} input tokens",
    r"for a total of {~}{requested_tokens} tokens",
    # vLLM, before tokenizing: "your prompt contains N characters (more than M characters, which
    # is the upper bound for K input tokens)".
    r"prompt contains {input_chars} characters \(more than {limit_chars} characters",
    # vLLM: "max_tokens=N cannot be greater than max_model_len=M" (the whole window is the cap).
    r"max_\w*tokens={max_tokens} cannot be greater than \w+={output_limit}",
    r"prompt is too long: {prompt_tokens}(?: tokens)? > {limit}",  # Anthropic / Bedrock / SGLang
    r"input token count \({prompt_tokens}\) exceeds the maximum number of tokens allowed"
    r" \(?{limit}",  # Gemini
    r"`inputs` tokens \+ `max_new_tokens` must be <= {limit}\. Given: {prompt_tokens}"
    r" `inputs` tokens and {max_tokens} `max_new_tokens`",  # TGI
    r"`inputs` must have less than {limit} tokens\. Given: {prompt_tokens}",  # TGI
    r"current length is {prompt_tokens} while limit is {limit}",  # Cerebras
    r"prompt token count of {prompt_tokens} exceeds the limit of {limit}",  # GitHub Copilot
    # vLLM: "The decoder prompt (length N) [plus the number of requested output tokens (at least
    # 1)] is longer than the maximum model length of M."
    r"\(length {prompt_tokens}\)[^\n]{0,80}?\bis longer than the maximum model length of {limit}",
    r"\(total length {prompt_tokens}\) is too long to fit into the model \(context length"
    r" {limit}\)",  # vLLM
    # A length with more added to it, the prompt named first: "prompt_token_ids length (N) plus
    # output_token_ids length (O) plus delta (D) exceeds max_model_len (M)" (vLLM).
    r"\blength \({prompt_tokens}\) plus [^\n]{0,120}?\bexceeds [^()\n]{0,40}?"
    r"\({limit}(?: tokens)?\)",
    # "(N [tokens]) exceeds/is longer than <the limit's name> (M [tokens])": llama.cpp server,
    # LocalAI, SGLang, oMLX, xAI ("Current message (N tokens) exceeds budget (M tokens)"), vLLM
    # ("Input length (N) exceeds model's maximum context length (M)").
    r"\({prompt_tokens}(?: tokens)?\) (?:exceeds|is longer than|is larger than) [^()\n]{0,60}?"
    r"\({limit}(?: tokens)?\)",
    # TensorRT-LLM: "Prompt length (N) exceeds maximum sequence length (M)", "The sum of
    # prompt length (N.0), query length (0) should not exceed max_num_tokens (M)", "The sum of
    # prompt length (N.0) and query length (0) max_tokens (X) should not exceed max_seq_len (M)".
    r"prompt length \({prompt_tokens}(?:\.0+)?\)[^\n]{0,60}?\bexceeds? [a-z_\s]{0,40}?\({limit}\)",
    r"\bmax_tokens \({max_tokens}\) should not exceed",
    # vLLM: "The engine prompt length N exceeds the max_model_len M" (Responses API), "Input of
    # N tokens exceeds max_tokens=M with truncate=NONE" (an embedding input's cap).
    r"\b(?:prompt|input) length {prompt_tokens} exceeds (?:the )?max_model_len {limit}",
    r"\binput of {prompt_tokens} tokens exceeds max_tokens={limit}",
    # A prompt's size as a count it has: "the prompt has N tokens" (vLLM, SGLang), "the questions
    # take N tokens", "Prepared prompt has N tokens" (LM Studio's mlx-engine), with the limit
    # "more than max_model_len=M", "more than the M this model reads", "does not fit the context
    # length of M tokens", "exceeding the fitted M-token context".
    r"\b(?:prompt|questions?|input) (?:has|takes?|contains) {prompt_tokens} tokens\b",
    r"more than (?:max_model_len=|the ){limit}\b(?! tokens)",
    r"\bcontext length of (?:only )?{limit} tokens",
    r"\b{limit}-token (?:context|window)\b",
    # SGLang: "Request prompt exceeds the KV memory budget: input_len=N", "After expanding
    # len(req.origin_input_ids_unpadded)=U => N >= M".
    r"\binput_len={prompt_tokens}",
    r"(?:=>|->) {prompt_tokens} >=? {limit}\b",
    # DashScope: "Range of input length should be [1, N]".
    r"(?:input|prompt) (?:length|tokens?) (?:should|must) be (?:in )?\[\d+, {limit}\]",
    # llama-cpp-python: the number is len(prompt_tokens) (llama_cpp/llama.py).
    r"requested tokens \({prompt_tokens}\) exceed context window of {limit}",
    r"max length: {limit}",
    r"number of tokens \({prompt_tokens}\) exceeded maximum context length \({limit}\)",
    r"limit={limit} prompt={prompt_tokens}",  # Ollama "truncating input prompt" log line
    r"keep the first {prompt_tokens} tokens.{0,160}?context length of only {limit}",  # LM Studio
    r"n_keep\W{0,3}{prompt_tokens}\)?\s*>=?\s*n_ctx\W{0,3}{limit}",  # LM Studio
    r"cannot exceed {limit} - received {requested_tokens}",  # Cohere
    r"maximum prompt length is {limit} but the request contains {prompt_tokens} tokens",  # xAI
    r"configured limit of {limit} tokens",  # GPT-5
    r"max(?:imum)? size:? {limit} tokens",  # GitHub Models
    r"expected maxLength: {limit_chars}, actual: {input_chars}",  # Bedrock
    r"at most {output_limit} (?:completion|output) tokens",
    r"expected a value <= {output_limit}, but got {max_tokens}",
    r"max_tokens: {max_tokens} > {output_limit}",
    r"exceeds the model(?:'s)? limit of {output_limit}",  # Bedrock
    r"range of max_\w*tokens (?:is|should be) \[\d+, {output_limit}\]",  # DeepSeek
    r"{max_tokens} is not less or equal to {output_limit}",
    r"value of {max_tokens} but the supported range is from \d+ \(inclusive\) to"
    r" {output_limit_excl} \(exclusive\)",
    r"(?<!\+\s)`max_new_tokens` must be <= {output_limit}(?:\. Given: {max_tokens})?",  # TGI
)


# `{~}` in a template: a size stated approximately ("about N tokens", "over N tokens").
_APPROXIMATELY: Final = (
    r"(?:(?:about|approximately|around|roughly|over|more\s+than|at\s+least|~)\s*)?"
)


def _compile_template(template: str) -> re.Pattern[str]:
    regex = template.replace(" ", r"\s+").replace("{~}", _APPROXIMATELY)
    regex = re.sub(r"\{([a-z_]+)\}", lambda m: rf"(?P<{m[1]}>{NUMBER})", regex)
    return re.compile(regex, re.IGNORECASE)


_NUMBER_PATTERNS: Final = tuple(_compile_template(t) for t in _NUMBER_TEMPLATES)

# Structured fields that state numbers (llama.cpp server's exceed_context_size_error).
NUMBER_KEYS: Final = {"n_prompt_tokens": "prompt_tokens", "n_ctx": "limit"}


def _to_int(text: str) -> int:
    return int(text.replace(",", "").replace("_", ""))


def numbers_in(text: str) -> dict[str, int]:
    """The numbers `text` states, by `ErrorInfo` field; the first template that gives one wins."""
    found: dict[str, int] = {}
    for pattern in _NUMBER_PATTERNS:
        for match in pattern.finditer(text):
            for field, raw in match.groupdict().items():
                if raw is None:  # an optional part of the template that was not there
                    continue
                value = _to_int(raw)
                if field.endswith("_excl"):
                    field, value = field.removesuffix("_excl"), value - 1
                found.setdefault(field, value)
    return found
