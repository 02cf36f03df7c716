"""The user's instructions in a text: the instruction lexicon, one place for every use.

Compaction verifies that a summary kept the user's explicit instructions
(`chatcli.compaction`), and carrying (`chatcli.history.carry`) moves them into the view when
their messages leave it: both read them with `extract_instructions` and `is_instruction`,
in English, Portuguese and Spanish.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["RULE_WORDS", "extract_instructions", "is_instruction", "sentences"]

_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+|\n+")


@dataclass(frozen=True, slots=True, kw_only=True)
class _Lexicon:
    """How one language states an instruction (phrases are comma-separated, lower case).

    `polite`: words that may come before an imperative ("please"). `starts`: first words of an
    imperative sentence, verbs and negations ("Use tabs.", "Não altere o main.py."); a first
    word followed by a comma does not count ("No, está bien."). `rules`: phrases that make any
    sentence a rule ("Tests must pass.", "Quero que você responda em português.").
    """

    polite: str
    starts: str
    rules: str


# chatcli's users write English, Portuguese and Spanish.
# Imperatives in Portuguese and Spanish are listed in the forms used to address the assistant
# (você / tú / usted). Pro-drop makes some of them look like third-person statements ("Usa
# Python 3.11."): such a sentence may be pinned needlessly, which costs a line, while a lost
# rule costs the user's trust.
_LEXICONS = {
    "en": _Lexicon(
        polite="please, pls, kindly",
        starts="add, always, answer, avoid, build, call, change, check, commit, create, delete, "
        "do, document, don't, dont, ensure, explain, fix, follow, format, give, ignore, "
        "implement, include, install, keep, leave, limit, list, make, move, name, never, note, "
        "prefer, print, put, read, refactor, remember, remove, rename, replace, reply, respond, "
        "return, run, send, show, skip, sort, start, stop, tell, translate, try, update, use, "
        "wait, write",
        rules="always, never, don't, dont, do not, must, must not, mustn't, should not, "
        "shouldn't, make sure, ensure, avoid, only, i want you to, i'd like you to, "
        "i would like you to, i need you to, i expect you to, you need to, you have to",
    ),
    "pt": _Lexicon(
        polite="por favor, por gentileza",
        starts="adicione, altere, apague, atualize, certifique-se, coloque, comece, confira, "
        "considere, corrija, crie, deixe, documente, escreva, evite, execute, explique, faça, "
        "formate, garanta, gere, ignore, implemente, inclua, jamais, leia, lembre, lembre-se, "
        "liste, mantenha, mostre, mude, não, nunca, pare, prefira, remova, renomeie, responda, "
        "rode, sempre, siga, traduza, troque, use, usa, utilize, verifique",
        rules="sempre, nunca, jamais, não deve, não devem, não pode, não podem, deve, devem, "
        "tem que, têm que, você precisa, certifique-se, garanta que, evite, somente, apenas, "
        "quero que, preciso que, gostaria que, é proibido",
    ),
    "es": _Lexicon(
        polite="por favor",
        starts="actualiza, agrega, añade, asegúrate, asegurate, borra, cambia, comprueba, "
        "considera, corrige, corrija, crea, deja, documenta, elimina, empieza, envía, escribe, "
        "escriba, evita, explica, explique, genera, haga, haz, ignora, implementa, incluye, "
        "jamás, lee, mantén, mantenga, muestra, no, nunca, pon, prefiere, quita, recuerda, "
        "renombra, responde, responda, revisa, siempre, traduce, usa, use, utiliza, verifica",
        rules="siempre, nunca, jamás, jamas, no debes, no debe, no deben, debes, debe, deben, "
        "tienes que, hay que, asegúrate, asegurate, evita, solo, sólo, solamente, únicamente, "
        "quiero que, necesito que, me gustaría que, está prohibido",
    ),
}


def _phrases(field: str) -> tuple[str, ...]:
    return tuple(
        phrase.strip()
        for lexicon in _LEXICONS.values()
        for phrase in getattr(lexicon, field).split(",")
    )


def _alternation(phrases: tuple[str, ...]) -> str:
    """A regex matching any of `phrases` as whole words, any spacing between their words."""
    longest_first = sorted(set(phrases), key=len, reverse=True)
    return "|".join(r"\s+".join(map(re.escape, p.split())) for p in longest_first)


_POLITE = re.compile(rf"^(?:{_alternation(_phrases('polite'))})(?!\w)[\s,:]*", re.IGNORECASE)
_STARTS = frozenset(_phrases("starts"))
RULE_WORDS = re.compile(rf"(?<!\w)(?:{_alternation(_phrases('rules'))})(?!\w)", re.IGNORECASE)


def extract_instructions(text: str) -> tuple[str, ...]:
    """The user's explicit instructions in `text`: imperative sentences and rule sentences.

    A sentence is an instruction when it starts with an imperative (after an optional
    "please" / "por favor") or states a rule (always, never, don't, must, make sure, "I want
    you to", sempre, nunca, não deve, siempre, no debes, ...: see `_LEXICONS`), in English,
    Portuguese or Spanish. Questions are not instructions. Deterministic; order kept,
    duplicates dropped.
    """
    found: dict[str, None] = {}
    for sentence in sentences(text):
        if not sentence.endswith("?") and is_instruction(sentence):
            found.setdefault(sentence, None)
    return tuple(found)


def sentences(text: str) -> tuple[str, ...]:
    """The sentences of `text` (a line is at least one), list marks and blanks stripped."""
    stripped = (raw.strip().lstrip("-*•>").strip() for raw in _SENTENCE_END.split(text))
    return tuple(sentence for sentence in stripped if sentence)


def is_instruction(sentence: str) -> bool:
    """Whether one sentence is an imperative or states a rule (see `extract_instructions`)."""
    plain = sentence.replace("’", "'")
    if RULE_WORDS.search(plain):
        return True
    words = _POLITE.sub("", plain.lstrip("¡¿ ")).lower().split()
    return bool(words) and words[0].rstrip(":") in _STARTS
