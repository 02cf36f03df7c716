"""What the user typed in a message, apart from what they pasted into it.

A user message often holds pasted material: a document, a log, code, a web page, a mail, a
docstring. That is data, not the user's instructions, and a page can be written to look like
instructions (a prompt injection). `typed_parts` splits a message into blocks (fenced code
blocks, then paragraphs between blank lines) and keeps the ones the user typed:

- A block is **pasted** when it is fenced; when its lines look pasted (`looks_pasted`: code,
  log lines, a stack trace, markup, quoted mail, indentation): one of a block of one or two
  lines, else at least two, or half of them; when it is hard-wrapped (a long line breaks
  mid-sentence and the next one goes on in lower case, as documents, docstrings and mail
  are wrapped and chat is not); or when it is long: more than `LONG_BLOCK_CHARS`, or more
  than `MANY_LINES` lines, unless half of them are rules, limits or requests (a list the
  user typed). A user types a few short sentences at a time.
- **A document**: a message whose paragraphs hold more than `MANY_LINES` lines in all, most
  of them not rules, limits or requests (a web page's text, a README, a log without blank
  lines between its paragraphs), or that has `_PARAGRAPHS` paragraphs or more, most of whose
  lines are not worth carrying at all (a docstring), is pasted whole but for a short ask at
  either end.
- What a block introduces ("Here is the log:", "Explain the part below.", a line ending in
  a colon) is pasted: the rest of its block after that line and the blocks after it up to
  the first pasted one, but a list mostly of rules or requests ("My rules:").
- Everything between the first and the last pasted block belongs to the paste.
- Before the first pasted block and after the last, a line is the user's own only when it is
  in the user's voice (`_VOICE`: a question, the first person, a word pointing at the paste
  ("below", "here is"), a request to do something with it ("Summarise it."), or a sentence
  that begins with a rule word; before the paste, an introduction ending in a colon that
  points at it, `_INTRO`); otherwise it is the paste's own first or last line (a docstring's
  summary line, a README's closing words). A paste often has no blank line
  around it ("Here is the log:" on the line before it): the first and last lines of the
  paste (`_EDGE_LINES` at most each) that look typed and are in the user's voice are the
  user's own too; so are the whole sentences before a wrapped paste on the line it begins
  on, when that line is longer than a document is wrapped at ("What does this do?
  (Recursively yield all ...").

A message with nothing pasted is typed whole, and so is a message whose only pastes are fenced
blocks (their fences say where they begin and end). The work is linear in the message's length.
"""

from __future__ import annotations

import re
from itertools import pairwise

from chatcli.history.instructions import kind_of, looks_pasted
from chatcli.history.text import without_markers

__all__ = ["LONG_BLOCK_CHARS", "MANY_LINES", "typed_parts"]

# A block longer than this (chars) or with more lines than this is pasted, not typed.
LONG_BLOCK_CHARS = 800
MANY_LINES = 8
# Lines at each end of a paste that may still be the user's ask around it.
_EDGE_LINES = 2
# A typed block around a paste is at most this long (chars).
_ASK_CHARS = 300
# Documents, docstrings and mail are wrapped at most this wide (chars).
_WRAP_WIDTH = 100
# A wrapped line is at least this long: a typed list's short lines end without punctuation too.
_WRAP_MIN = 45
# A message of this many paragraphs or more, most of whose lines are not worth carrying, is a
# document.
_PARAGRAPHS = 2
# A list the user typed has at most this many lines.
_LIST_LINES = 40
_ASKS = frozenset({"rule", "constraint", "preference"})
# A fenced block, closed (an unclosed fence is read as the text it is: the rest of a message
# is not taken for code because of one, nor a reST heading's underline for a fence).
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,}).*?^ {0,3}\1[^\n]*$", re.MULTILINE | re.DOTALL)
_BLANK = re.compile(r"\n[ \t]*\n")
_ENDS_SENTENCE = re.compile(r"[.!?:;\"')\]»”]\s*$")
_GOES_ON = re.compile(r"^\s*[\w(`'\"]")
# The end of a sentence inside a line, before the next one.
_SENTENCE_END = re.compile(r"[.!?:][\"')\]»”]*\s+(?=\S)")
# The user's voice: what a document does not say of itself. A question, the first person, a
# word pointing at the paste, a request to do something with it ("Summarise it."), a sentence
# that begins with a rule word.
_POINTER = (
    r"(?:it|this|these|those|them|the above|the below|isso|isto|este|esta|esto|eso|estos|"
    r"estas)"
)
_VOICE = re.compile(
    r"\?\s*$"
    r"|(?<![\w'-])(?:i|i'm|i've|i'd|i'll|me|my|we|we're|we've|our|(?-i:us)|eu|meu|minha|meus|"
    r"minhas|nós|nosso|nossa|nossos|nossas|yo|mi|mis|nosotros|nosotras|nuestro|nuestra|"
    r"nuestros|nuestras)(?![\w'-])"
    r"|(?<![\w'-])(?:below|above|here is|here's|here are|pasted|abaixo|acima|segue|"
    r"aqui está|colei|abajo|arriba|aquí está|pegué)(?![\w'-])"
    r"|^\W*(?:please\s+|por favor,?\s+)?(?:summari[sz]e|explain|translate|review|rewrite|"
    r"describe|analy[sz]e|compare|simplify|shorten|proofread|tell|fix|debug|check|read|"
    r"resuma|explique|traduza|revise|reescreva|descreva|analise|simplifique|corrija|leia|"
    r"resume|explica|traduce|revisa|reescribe|analiza|compara|simplifica|corrige|lee)"
    rf"\s+(?:[\w'-]+\s+){{0,2}}?{_POINTER}(?![\w'-])"
    r"|^\W*(?:never|always|don't|do not|under no circumstances|nunca|sempre|jamais|não|"
    r"jamás|siempre)(?![\w'-])",
    re.IGNORECASE | re.MULTILINE,
)
# Before a paste, a line ending in a colon that points at it introduces it ("Here is what I
# found:"); one that does not is the document's own ("Arguments are:").
_INTRO = re.compile(
    rf"(?<![\w'-])(?:{_POINTER}|here|following|log|logs|page|output|error|errors|code|file|"
    r"docs?|text|message|snippet|trace|mail|email|article|readme|result|results|segue|"
    r"seguinte|siguiente)(?![\w'-])[^.!?\n]*:\s*$",
    re.IGNORECASE,
)
# A block that introduces what follows it: a paste.
_FORWARD = re.compile(
    r"(?<![\w'-])(?:below|the following|as follows|here is|here's|here are|abaixo|a seguir|"
    r"o seguinte|segue|aqui está|abajo|lo siguiente|a continuación|aquí está)(?![\w'-])"
    r"|:[ \t]*$",
    re.IGNORECASE | re.MULTILINE,
)
# A list item: a document's, when it ends one (a typed ask is a sentence).
_LIST_ITEM = re.compile(r"^\s*(?:[-*+•]|\d+[.)])\s")


def typed_parts(text: str) -> tuple[str, ...]:
    """The parts of `text` the user typed, in order (see the module docstring); the marker
    of a cut copy is not the user's ("[... 1,234 chars cut ...]")."""
    blocks = _blocks(without_markers(text))
    if all(_FENCE.match(block) for block, pasted in blocks if pasted):
        # Nothing pasted, or only fenced blocks: their fences say where they end.
        return tuple(block for block, pasted in blocks if not pasted)
    blocks = _introduced(blocks)
    pasted = [i for i, (_, is_pasted) in enumerate(blocks) if is_pasted]
    first, last = pasted[0], pasted[-1]
    head = _edge(blocks[first][0], reverse=False)
    # One pasted block: its last lines are looked at past the ones its head took.
    skip = len(head) if first == last else 0
    before = [block for block, _ in blocks[:first]] + head
    after = _edge(blocks[last][0], reverse=True, skip=skip)
    after += [block for block, _ in blocks[last + 1 :]]
    own = [line for b in before for line in b.split("\n") if _voiced(line, intro=True)]
    own += [line for b in after for line in b.split("\n") if _voiced(line)]
    return tuple(own)


def _voiced(block: str, *, intro: bool = False) -> bool:
    """Whether a block next to a paste is in the user's voice (`_VOICE`; before the paste,
    an introduction ending in a colon too)."""
    return _VOICE.search(block) is not None or (intro and _INTRO.search(block) is not None)


def _blocks(text: str) -> list[tuple[str, bool]]:
    """The message's blocks in order, each with whether it is pasted (see the module
    docstring: a document's blocks are all pasted but a short ask at either end)."""
    blocks: list[tuple[str, bool]] = []
    at = 0
    for fence in _FENCE.finditer(text):
        blocks += _paragraphs(text[at : fence.start()])
        blocks.append((fence.group(), True))
        at = fence.end()
    blocks += _paragraphs(text[at:])
    lines = [line for block, _ in blocks for line in block.splitlines() if line.strip()]
    paragraphs = sum(1 for _, pasted in blocks if not pasted)
    document = len(lines) > MANY_LINES and not _mostly_instructions(lines)
    if not document and not (paragraphs >= _PARAGRAPHS and not _mostly_items(lines)):
        return blocks
    ends = {0: True, len(blocks) - 1: False}
    return [
        (b, pasted or i not in ends or not _ask(b, intro=ends[i]))
        for i, (b, pasted) in enumerate(blocks)
    ]


def _introduced(blocks: list[tuple[str, bool]]) -> list[tuple[str, bool]]:
    """`blocks` with what an introduction ("Here is the log:", "Explain the part below.")
    introduces pasted: the blocks after it up to the first pasted one, but a list mostly of
    rules or requests (the user's own: "My rules:"); on its own lines after it, too."""
    intro = next(
        (
            i
            for i, (b, pasted) in enumerate(blocks)
            if not pasted and _FORWARD.search(b) and (i + 1 < len(blocks) or "\n" in b.strip())
        ),
        None,
    )
    if intro is None:
        return blocks
    lines = blocks[intro][0].split("\n")
    at = next(i for i, line in enumerate(lines) if _FORWARD.search(line)) + 1
    out = [*blocks[:intro], ("\n".join(lines[:at]), False)]
    if at < len(lines):  # the paste began on the next line
        rest_of_block = "\n".join(lines[at:])
        out.append((rest_of_block, not _own_list(rest_of_block)))
    rest = blocks[intro + 1 :]
    upto = next((i for i, (_, pasted) in enumerate(rest) if pasted), len(rest))
    out += [(b, not _own_list(b)) for b, _ in rest[:upto]]
    return out + rest[upto:]


def _own_list(block: str) -> bool:
    lines = [line for line in block.splitlines() if line.strip()]
    return len(lines) >= 2 and _mostly_instructions(lines)


def _paragraphs(text: str) -> list[tuple[str, bool]]:
    return [(p, _is_pasted(p)) for p in _BLANK.split(text) if p.strip()]


def _ask(block: str, *, intro: bool) -> bool:
    """A short block in the user's voice, not a list item: an ask at one end of a document
    (`intro`: at its start)."""
    short = len(block) <= _ASK_CHARS and block.count("\n") < _EDGE_LINES
    return short and not _LIST_ITEM.match(block) and _voiced(block, intro=intro)


def _edge(block: str, *, reverse: bool, skip: int = 0) -> list[str]:
    """The first (or last) lines of a pasted block (at most `_EDGE_LINES`, never all of it,
    nor its first `skip` lines) that look typed and are in the user's voice: an ask next to
    a paste with no blank line between them. None of a fenced block."""
    if _FENCE.match(block):
        return []
    lines = block.strip("\n").split("\n")[skip:]
    ordered = lines[::-1] if reverse else lines
    own: list[str] = []
    for at, line in enumerate(ordered[: min(_EDGE_LINES, len(lines) - 1)]):
        # A line the paste's wrapping runs into (or out of) is the paste's.
        inner = ordered[at + 1]
        wrapped = _wrapped(inner, line) if reverse else _wrapped(line, inner)
        if wrapped and not reverse:
            typed = _typed_head(line, lines[at + 1 :])
            own += [typed] if typed and _voiced(typed, intro=True) else []
            break
        if len(line) > _ASK_CHARS or looks_pasted(line) or wrapped:
            break
        if not _voiced(line, intro=not reverse):
            break
        own.append(line)
    return own[::-1] if reverse else own


def _typed_head(line: str, rest: list[str]) -> str:
    """The whole sentences a user typed on the line a wrapped paste begins on ("What does
    this do? (Recursively yield all nodes in the"): the line is longer than a document is
    wrapped at (`_WRAP_WIDTH`, or its other lines' width), and the paste's start after them
    fits that width. "" when the line is not (the paste's own first line) or holds no whole
    sentence."""
    width = max([_WRAP_WIDTH, *(len(other) for other in rest)])
    ends = [m.end() for m in _SENTENCE_END.finditer(line)]
    if not ends or len(line) <= width or len(line) - ends[-1] > width:
        return ""
    typed = line[: ends[-1]].strip()
    return "" if looks_pasted(typed) else typed


def _is_pasted(paragraph: str) -> bool:
    lines = [line for line in paragraph.splitlines() if line.strip()]
    if len(paragraph.strip()) > LONG_BLOCK_CHARS:
        return True
    if len(lines) > MANY_LINES and not _mostly_instructions(lines):
        return True
    marked = sum(1 for line in lines if looks_pasted(line))
    if marked and (len(lines) <= 2 or marked >= 2 or 2 * marked >= len(lines)):
        return True
    return any(_wrapped(a, b) for a, b in pairwise(lines))


def _mostly_items(lines: list[str]) -> bool:
    """Half the lines or more are worth carrying: what a user types, several paragraphs of
    it (a document's paragraphs mostly describe)."""
    if len(lines) > _LIST_LINES:
        return False
    return 2 * sum(1 for line in lines if kind_of(line) is not None) >= len(lines)


def _mostly_instructions(lines: list[str]) -> bool:
    """Half the lines or more are rules, limits or requests: a list the user typed (facts
    alone are what a log or a table holds)."""
    if len(lines) > _LIST_LINES:
        return False
    asks = sum(1 for line in lines if kind_of(line) in _ASKS)
    return 2 * asks >= len(lines)


def _wrapped(line: str, following: str) -> bool:
    """`line` breaks mid-sentence and `following` goes on with it."""
    stripped = line.rstrip()
    return (
        len(stripped) >= _WRAP_MIN
        and not _ENDS_SENTENCE.search(stripped)
        and bool(_GOES_ON.match(following))
    )
