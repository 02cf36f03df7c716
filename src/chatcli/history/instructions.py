"""The user's instructions in a text: the instruction vocabulary, one place for every use.

Compaction verifies that a summary kept the user's explicit instructions
(`chatcli.compaction`), and carrying (`chatcli.history.carry`) moves the user's rules, limits,
facts and preferences into the view when their messages leave it: both read them here, in
English, Portuguese and Spanish. `kind_of` names what a sentence is:

- a **rule**: a prohibition or an obligation, in any of the usual forms: an imperative with
  "never" / "always", a modal ("must", "you may not"), a ban stated as a fact ("X is off
  limits", "it is forbidden to ...", "under no circumstances ...", "no force pushes"), an
  exclusive ("only ever ...", "exclusively"); and a statement that lifts or changes an
  earlier rule ("pushing to main is fine now", "forget what I said about Fridays");
- a **constraint**: a limit with a quantity ("at most 3 retries", "below four thousand
  euros", "before 2026-03-01", "the budget cap is 5,000 EUR"), numbers in digits or words;
- a **fact**: an exact value (an amount, a number with a unit, a date, a version, a path, a
  URL, a code), or a goal ("our goal is ...", "the target is ...");
- a **preference**: an imperative without a rule word ("Use tabs."), or a stated liking
  ("I prefer short answers.").

Not instructions: questions; lines that look pasted rather than typed (code, log lines,
markup: `looks_pasted`); and words addressed to AI assistants in the third person ("AI
assistants reading this: ..."), which a user does not write to their own assistant but a
page written to hijack one does.

`changes` tells a statement that something changed ("now", "again", "no longer", "instead",
"forget", ...): a later statement on the same point as an earlier rule, with such a word, is
carried beside it. Everything here is deterministic and linear in the sentence.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

__all__ = [
    "RULE_WORDS",
    "changes",
    "content_words",
    "extract_instructions",
    "is_instruction",
    "kind_of",
    "looks_pasted",
    "sentences",
    "value_spans",
]

_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+|\n+")


@dataclass(frozen=True, slots=True, kw_only=True)
class _Lexicon:
    """How one language states an instruction (phrases are comma-separated, lower case; a
    phrase matches as whole words, any spacing between them).

    `polite`: words that may come before an imperative ("please"). `starts`: first words of
    an imperative sentence ("Use tabs.", "Não altere o main.py."); a first word followed by a
    comma does not count ("No, está bien."). `negations`: a first word that makes an
    imperative a prohibition ("No borres ...", "Não apague ..."). `bans`: phrases that make
    any sentence a prohibition. `musts`: phrases that make any sentence an obligation.
    `lifts`: phrases that lift or change an earlier rule. `limits`: words that, before a
    quantity, make it a limit; `deadlines`: the same before a date or a time. `numbers`: number
    words; `dates`: days, months and times of day in words. `units`: currency and unit words.
    `likes`: a stated preference. `goals`: a goal. `changed`: a word that says something
    changed. `not_rules`: first words that look like a ban but are not ("no problem").
    """

    polite: str
    starts: str
    negations: str
    bans: str
    musts: str
    lifts: str
    limits: str
    deadlines: str
    numbers: str
    dates: str
    units: str
    likes: str
    goals: str
    changed: str
    not_rules: str


_LEXICONS = {
    "en": _Lexicon(
        polite="please, pls, kindly",
        starts="add, always, answer, avoid, build, call, change, check, commit, create, delete, "
        "do, document, don't, dont, ensure, explain, fix, follow, format, give, ignore, "
        "implement, include, install, keep, leave, limit, list, make, move, name, never, note, "
        "prefer, print, put, read, refactor, remember, remove, rename, replace, reply, respond, "
        "return, run, send, show, skip, sort, start, stay, stick, stop, tell, translate, try, "
        "update, use, wait, write",
        negations="no, never, don't, dont, do not",
        bans="never, don't, dont, do not, must not, mustn't, should not, shouldn't, you may not, "
        "you cannot, you can't, you can not, you won't, not allowed, not permitted, "
        "not authorized, "
        "no longer allowed, forbidden, prohibited, banned, off limits, off-limits, "
        "out of bounds, under no circumstances, in no circumstances, in no case, at no time, "
        "on no account, no matter what, not under any circumstances, not ever, nobody may, "
        "no one may, nobody is allowed, no one is allowed, stay away from, keep away from, "
        "keep your hands off, hands off, refrain from, avoid, is not to be, are not to be, "
        "not to be touched, is a no-go, are a no-go, not an option",
        musts="always, must, has to, needs to, required, requires, "
        "mandatory, compulsory, make sure, ensure, be sure to, remember to, "
        "don't forget to, do not forget to, it is essential, it's essential, only, "
        "only ever, exclusively, solely, at all times, every single time, without exception, "
        "without fail, i want you to, i'd like you to, i would like you to, i need you to, "
        "i expect you to, you need to, you have to, you should, you are to, you're to, "
        "is to be, are to be, reserved for, restricted to, limited to",
        lifts="is fine now, are fine now, is ok now, are ok now, is okay now, are okay now, "
        "is allowed now, are allowed now, is allowed again, are allowed again, "
        "is back, are back, feel free, you may, you can, go ahead, no longer, not anymore, "
        "any more, anymore, forget what i said, forget about, ignore what i said, "
        "ignore the earlier, ignore my earlier, disregard, scratch that, never mind, "
        "nevermind, is lifted, are lifted, lift the, drop the rule, drop the limit, "
        "doesn't apply, does not apply, no need to, is no longer",
        limits="at most, at least, no more than, no less than, not more than, not less than, "
        "no fewer than, up to, maximum, max, minimum, min, limit, limited, cap, capped, "
        "ceiling, budget, within, under, below, above, over, beyond, exceed, exceeds, "
        "exceeding, less than, more than, fewer than, lower than, higher than, greater than, "
        "shorter than, longer than, tops, threshold",
        deadlines="deadline, due, before, by, after, until, till, no later than, "
        "no earlier than, from",
        numbers="zero, one, two, three, four, five, six, seven, eight, nine, ten, eleven, "
        "twelve, thirteen, fourteen, fifteen, sixteen, seventeen, eighteen, nineteen, twenty, "
        "thirty, forty, fifty, sixty, seventy, eighty, ninety, hundred, thousand, million, "
        "billion, dozen, half, a couple of, a few",
        dates="monday, tuesday, wednesday, thursday, friday, saturday, sunday, tomorrow, "
        "tonight, noon, midnight, eod, end of day, end of the day, end of the week, "
        "end of the month, next week, january, february, march, april, june, july, august, "
        "september, october, november, december",
        units="euro, euros, eur, dollar, dollars, usd, pound, pounds, gbp, cent, cents, percent, "
        "per cent, second, seconds, minute, minutes, hour, hours, day, days, week, weeks, "
        "month, months, year, years, line, lines, character, characters, word, words, token, "
        "tokens, request, requests, retry, retries, attempt, attempts, file, files, item, "
        "items, user, users, step, steps, call, calls, page, pages, megabyte, megabytes, "
        "gigabyte, gigabytes, kilobyte, kilobytes, person, people, times",
        likes="prefer, i prefer, i like, i love, i'd rather, i would rather, i want, i'd like, "
        "i would like, my preference, i favour, i favor",
        goals="our goal, the goal, my goal, our target, the target, our aim, the aim, "
        "our objective, the objective, the plan is, our plan is, we are migrating, "
        "we're migrating, we are moving, we're moving, we want to, we need to, we are trying to, "
        "we're trying to, the idea is, done means, success means",
        changed="now, again, anymore, any more, no longer, instead, actually, correction, "
        "update, updated, changed, change of plan, forget, ignore, disregard, scratch, "
        "never mind, nevermind, lifted, fine, ok, okay, allowed, permitted, free to, "
        "go ahead, back, moved, new, revised, from now on, cancel, cancelled, canceled, "
        "not needed, no need, doesn't apply, rather, make it, switch",
        not_rules="no problem, no worries, no thanks, no thank you, no idea, no way, "
        "no rush, no hurry, no luck, no change, no changes, no, never mind, nevermind",
    ),
    "pt": _Lexicon(
        polite="por favor, por gentileza",
        starts="adicione, altere, apague, atualize, certifique-se, coloque, comece, confira, "
        "considere, corrija, crie, deixe, documente, escreva, evite, execute, explique, faça, "
        "formate, garanta, gere, ignore, implemente, inclua, jamais, leia, lembre, lembre-se, "
        "liste, mantenha, mostre, mude, pare, prefira, remova, renomeie, responda, "
        "rode, sempre, siga, traduza, troque, use, usa, utilize, verifique, fique, envie",
        negations="não, nunca, jamais",
        bans="nunca, jamais, não deve, não devem, não pode, não podem, não é permitido, "
        "não são permitidos, não está permitido, não está autorizado, proibido, proibida, "
        "proibidos, proibidas, é proibido, está proibido, fica proibido, em hipótese alguma, "
        "em nenhuma hipótese, sob nenhuma circunstância, sob hipótese alguma, "
        "em nenhum caso, em nenhuma circunstância, de jeito nenhum, de forma alguma, "
        "de modo algum, nem pensar, fora dos limites, fora de cogitação, evite, "
        "ninguém pode, não mexa, não toque",
        musts="sempre, deve, devem, deverá, tem que, têm que, tem de, têm de, precisa, precisam, "
        "você precisa, é obrigatório, obrigatório, obrigatória, obrigatoriamente, "
        "certifique-se, garanta, garanta que, lembre-se de, somente, apenas, só, "
        "exclusivamente, unicamente, sem exceção, em todos os casos, quero que, preciso que, "
        "gostaria que, reservado para, restrito a, limitado a",
        lifts="pode, podem, já pode, pode voltar a, está liberado, está liberada, liberado, "
        "liberada, tudo bem agora, está ok agora, está tudo bem, esqueça o que eu disse, "
        "esqueça, ignore o que eu disse, desconsidere, não precisa mais, não é mais, "
        "não vale mais, deixa pra lá, voltou, está de volta, de novo, novamente",
        limits="no máximo, no mínimo, até, abaixo de, acima de, menos de, mais de, "
        "não ultrapassar, não ultrapasse, não exceder, não exceda, não passar de, "
        "não passe de, limite, teto, máximo, mínimo, orçamento, dentro de, inferior a, "
        "superior a",
        deadlines="prazo, antes de, depois de, a partir de",
        numbers="zero, um, uma, dois, duas, três, quatro, cinco, seis, sete, oito, nove, dez, "
        "onze, doze, treze, quatorze, catorze, quinze, dezesseis, dezessete, dezoito, "
        "dezenove, vinte, trinta, quarenta, cinquenta, sessenta, setenta, oitenta, noventa, "
        "cem, cento, duzentos, trezentos, quatrocentos, quinhentos, mil, milhão, milhões, "
        "bilhão, meia, meio, dúzia",
        dates="segunda, terça, quarta, quinta, sexta, sábado, domingo, amanhã, meio-dia, "
        "meia-noite, janeiro, fevereiro, março, abril, maio, junho, julho, agosto, setembro, "
        "outubro, novembro, dezembro, fim do dia, fim do mês, semana que vem",
        units="euro, euros, real, reais, dólar, dólares, por cento, segundo, segundos, minuto, "
        "minutos, hora, horas, dia, dias, semana, semanas, mês, meses, ano, anos, linha, "
        "linhas, caractere, caracteres, palavra, palavras, tentativa, tentativas, arquivo, "
        "arquivos, usuário, usuários, pessoa, pessoas, vezes, páginas",
        likes="prefiro, eu prefiro, gosto de, eu gosto, quero, eu quero, gostaria de, "
        "minha preferência",
        goals="nosso objetivo, o objetivo, meu objetivo, a meta, nossa meta, o alvo, o plano é, "
        "estamos migrando, queremos, precisamos, a ideia é",
        changed="agora, de novo, novamente, mais, em vez, ao invés, na verdade, correção, "
        "atualização, mudou, mudança, esqueça, ignore, desconsidere, liberado, liberada, "
        "pode, podem, voltou, a partir de agora, cancelado, cancelada, não precisa",
        not_rules="não, nunca mais",
    ),
    "es": _Lexicon(
        polite="por favor",
        starts="actualiza, agrega, añade, asegúrate, asegurate, borra, cambia, comprueba, "
        "considera, corrige, corrija, crea, deja, documenta, elimina, empieza, envía, escribe, "
        "escriba, evita, explica, explique, genera, haga, haz, ignora, implementa, incluye, "
        "lee, mantén, mantenga, muestra, pon, prefiere, quita, recuerda, "
        "renombra, responde, responda, revisa, siempre, traduce, usa, use, utiliza, verifica, "
        "quédate, limita",
        negations="no, nunca, jamás, jamas",
        bans="nunca, jamás, jamas, no debes, no debe, no deben, no puedes, no puede, no pueden, "
        "no se puede, no se permite, no está permitido, no están permitidos, prohibido, "
        "prohibida, prohibidos, prohibidas, está prohibido, queda prohibido, "
        "bajo ninguna circunstancia, en ninguna circunstancia, en ningún caso, "
        "de ninguna manera, de ningún modo, ni se te ocurra, ni hablar, fuera de los límites, "
        "fuera de límites, evita, nadie puede, no toques",
        musts="siempre, debes, debe, deben, deberás, tienes que, tiene que, tienen que, hay que, "
        "es obligatorio, obligatorio, obligatoria, obligatoriamente, asegúrate, asegurate, "
        "recuerda, solo, sólo, solamente, únicamente, exclusivamente, sin excepción, "
        "en todo momento, quiero que, necesito que, me gustaría que, reservado para, "
        "restringido a, limitado a",
        lifts="puedes, pueden, ya puedes, ya se puede, puedes volver a, está bien ahora, "
        "ya está bien, olvida lo que dije, olvida, olvídate, ignora lo que dije, "
        "no hace falta, ya no, ya no es, ya no hay, volvió, está de vuelta, de nuevo, "
        "otra vez, queda permitido, está permitido",
        limits="como máximo, como mínimo, a lo sumo, hasta, por debajo de, por encima de, "
        "menos de, más de, no superar, no superes, no exceder, no excedas, no pasar de, "
        "no pases de, límite, tope, máximo, mínimo, presupuesto, dentro de, inferior a, "
        "superior a",
        deadlines="plazo, antes de, después de, a partir de",
        numbers="cero, dos, tres, cuatro, cinco, seis, siete, ocho, nueve, diez, once, "
        "doce, trece, catorce, quince, dieciséis, diecisiete, dieciocho, diecinueve, veinte, "
        "treinta, cuarenta, cincuenta, sesenta, setenta, ochenta, noventa, cien, ciento, "
        "doscientos, trescientos, cuatrocientos, quinientos, mil, millón, millones, "
        "media, medio, docena",
        dates="lunes, martes, miércoles, jueves, viernes, sábado, domingo, mañana, mediodía, "
        "medianoche, enero, febrero, marzo, abril, mayo, junio, julio, agosto, septiembre, "
        "octubre, noviembre, diciembre, fin de mes, la semana que viene",
        units="euro, euros, dólar, dólares, peso, pesos, por ciento, segundo, segundos, minuto, "
        "minutos, hora, horas, día, días, semana, semanas, mes, meses, año, años, línea, "
        "líneas, carácter, caracteres, palabra, palabras, intento, intentos, archivo, "
        "archivos, usuario, usuarios, persona, personas, veces, páginas",
        likes="prefiero, yo prefiero, me gusta, me gustan, quiero, yo quiero, me gustaría",
        goals="nuestro objetivo, el objetivo, mi objetivo, la meta, nuestra meta, el plan es, "
        "estamos migrando, queremos, necesitamos, la idea es",
        changed="ahora, de nuevo, otra vez, ya no, en vez, en lugar, en realidad, corrección, "
        "actualización, cambió, cambio, olvida, olvídate, ignora, permitido, puedes, pueden, "
        "volvió, a partir de ahora, cancelado, cancelada, no hace falta",
        not_rules="no, no hay problema, no pasa nada, no gracias, ni idea",
    ),
}


def _phrases(field: str) -> tuple[str, ...]:
    return tuple(
        phrase.strip()
        for lexicon in _LEXICONS.values()
        for phrase in getattr(lexicon, field).split(",")
        if phrase.strip()
    )


def _alternation(phrases: tuple[str, ...]) -> str:
    """A regex matching any of `phrases` as whole words, any spacing between their words."""
    longest_first = sorted(set(phrases), key=len, reverse=True)
    return "|".join(r"\s+".join(map(re.escape, p.split())) for p in longest_first)


def _words(field: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![\w-])(?:{_alternation(_phrases(field))})(?![\w-])", re.IGNORECASE)


_POLITE = re.compile(rf"^(?:{_alternation(_phrases('polite'))})(?!\w)[\s,:]*", re.IGNORECASE)
_STARTS = frozenset(_phrases("starts"))
_NEGATIONS = frozenset(_phrases("negations"))
_NOT_RULES = re.compile(
    rf"^(?:{_alternation(_phrases('not_rules'))})(?:[\s,.!:;]*$|\s*[,.!:;])", re.IGNORECASE
)
_BANS = _words("bans")
_MUSTS = _words("musts")
_LIFTS = _words("lifts")
_LIKES = _words("likes")
_GOALS = _words("goals")
_CHANGED = _words("changed")
# Any prohibition or obligation phrase (compaction and carrying both read it).
RULE_WORDS = re.compile(
    rf"(?<![\w-])(?:{_alternation(_phrases('bans') + _phrases('musts'))})(?![\w-])",
    re.IGNORECASE,
)

# Content words (`content_words`): of three letters or more, or a number; and the words that
# say nothing of what a statement is about.
_WORD = re.compile(r"[^\W\d_]{3,}|\b\d+\b")
_ACCENTS = re.compile(r"[\u0300-\u036f]")
_STOP_TEXT = """
    the and for are is was were this that these those with from into onto our your you not but
    can may will would could should all any also then than just please its it's use using them
    they their there here what when which who whom how about again instead anymore actually
    okay still let let's has have had been being too very get got make made does did doing
    done want need like sure thing things something anything everything some one ones such
    each other more most much many only own same so yet ever even well way time now over out
    off per via etc she her his him hers theirs ours yours mine myself yourself itself
    que para com por uma uns umas dos das nos nas pelo pela pelos pelas isso isto este esta
    esse essa estes estas esses essas aqui agora mais muito muita não sim você vocês ele ela
    eles elas nós seu sua seus suas meu minha meus minhas como quando onde qual quais ser
    estar está são foi tem ter fazer faz pode deve também sempre nunca ainda já então porque
    una unos unas los las del les esto eso ese esa esos esas aquí ahora más muy usted
    ustedes ellos ellas nosotros nuestro nuestra cual cuales cuando donde hacer hace puede
    debe también siempre nunca todavía entonces porque pero sino está están fue hay
"""
_STOP_WORDS = frozenset(_STOP_TEXT.split())

# Exact values: what a user cannot expect a summary to keep character for character.
_VALUE = re.compile(
    "|".join(
        (
            r"https?://\S+",
            r"\b[\w.+-]+@[\w-]+\.[\w.]+",
            r"(?:~|\.{1,2})?/[\w.@-]+(?:/[\w.@-]+)+",
            r"\b[\w-]+(?:/[\w.-]+)+",
            r"\b[\w-]+\.(?:py|js|ts|tsx|json|ya?ml|toml|md|txt|sh|go|rs|java|c|h|cpp|sql|csv|"
            r"ini|cfg|conf|env|lock|html|css)\b",
            r"\bv?\d+\.\d+(?:\.\d+)+\b|\bv\d+(?:\.\d+)?\b",
            r"\b\d{4}-\d{2}-\d{2}\b|\b\d{1,2}/\d{1,2}/\d{2,4}\b|\b\d{1,2}:\d{2}\b|\b\d{1,2}h\d{0,2}\b",
            r"\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.? \d{1,2}\b",
            r"\b\d{1,2}(?:st|nd|rd|th)? (?:of )?(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|"
            r"dec)[a-z]*\b",
            r"\b\d{1,2} de (?:jan|fev|mar|abr|mai|jun|jul|ago|set|out|nov|dez|ene|feb|abr|may|"
            r"ago|sep|oct|dic)[a-zç]*\b",
            r"[$€£¥]\s?\d[\d,.]*\s?[kmb]?\b",
            r"\b\d[\d,.]*\s?(?:%|[kmb]\b|eur|usd|gbp|brl|chf|jpy|euros?|dollars?|reais|ms|s|sec|"
            r"seconds?|min|minutes?|h|hours?|days?|weeks?|months?|years?|[kmgt]i?b|px|cm|mm|"
            r"km|kg|g|m|lines?|chars?|characters|tokens?|words?|requests?|rps|qps|users?|"
            r"retries|times|cores?|threads?|replicas?|workers?|items?|steps?|rows?|files?)\b",
            r"\b\d{1,3}(?:,\d{3})+\b|\b\d{3,}\b|\b\d+(?:[.,]\d+)?\b",
            r"\b(?=[\w-]*\d)(?=[\w-]*[A-Za-z])[A-Za-z0-9][\w-]{2,}\b",
        )
    ),
    re.IGNORECASE,
)
# Kept apart from `_VALUE`: a bare number is a quantity for a limit, not an exact value worth
# carrying on its own ("Give me 3 ideas." is a preference).
_BARE_NUMBER = re.compile(r"^\d{1,2}(?:[.,]\d+)?$")
# A limit word, then up to three words, then a quantity (digits, number words or a date); a
# deadline word, then a date or a time ("by Friday", "before 10:00", not "by two spaces").
_BETWEEN = r"(?:[\s,:]+[\w'’-]+){0,3}?[\s,:]+(?:the |a |an |o |os |as |el |la |los |las )?"
_WHEN = rf"(?:\d|(?:{_alternation(_phrases('dates'))})(?![\w-]))"
_QUANTITY = rf"(?:[$€£¥]\s?\d|(?:{_alternation(_phrases('numbers'))})(?![\w-])|{_WHEN})"
# A quantity in words with its unit ("four thousand euros", "cinco minutos"): an exact value.
_NUMBERS = _alternation(_phrases("numbers"))
_WORDED_VALUE = re.compile(
    rf"(?<![\w-])(?:{_NUMBERS})(?:[\s-]+(?:and |e |y )?(?:{_NUMBERS}))*\s+"
    rf"(?:{_alternation(_phrases('units'))})(?![\w-])",
    re.IGNORECASE,
)
_LIMITED = re.compile(
    rf"(?<![\w-])(?:{_alternation(_phrases('limits'))})(?![\w-]){_BETWEEN}{_QUANTITY}"
    rf"|(?<![\w-])(?:{_alternation(_phrases('deadlines'))})(?![\w-]){_BETWEEN}{_WHEN}",
    re.IGNORECASE,
)
# Words addressed to AI systems in the third person: a page written to hijack one, not a user.
_AI = (
    r"(?:ai|a\.i\.|llms?|gpts?|chatbots?|language models?|ai models?|ai assistants?|"
    r"ai agents?|ias?|modelos? de (?:linguagem|lenguaje)|assistentes? de ia|asistentes? de ia|"
    r"agentes? de ia|copilots?|claude|chatgpt|gemini)"
)
_ANY_AI = rf"(?:{_AI}|assistants?|agents?|bots?|models?|assistentes?|asistentes?|agentes?)"
_READING = (
    r"(?:reading|processing|parsing|summari[sz]ing|crawling|scraping|indexing|that reads?|"
    r"who reads?|that see|which reads?|lendo|que lê|que leem|leyendo|que lee|que leen)"
)
_TO_AI = re.compile(
    rf"^(?:note|message|attention|instructions?|notice|important|nota|atenção|atención)?"
    rf"[\s,:]*(?:to|for|para)?\s*(?:all|any|every|dear|hey|the|todos os|todas as|todos los|"
    rf"todas las|os|as|los|las|cualquier|qualquer)?\s*{_AI}\b\s*:"
    rf"|\b{_ANY_AI}\b[^.!?]{{0,30}}?\b{_READING}\b"
    rf"|\bif you are an? {_ANY_AI}\b|\b(?:note|attention|instructions?|message) (?:to|for) "
    rf"(?:all |any )?{_ANY_AI}\b|\bse (?:você )?(?:for|é) uma? {_ANY_AI}\b"
    rf"|\bsi eres una? {_ANY_AI}\b",
    re.IGNORECASE,
)
# What a line of code, a log, markup or a mail header looks like (`looks_pasted`).
_PASTED_LINE = re.compile(
    "|".join(
        (
            r"^\s*(?:async\s+)?def\s+\w+\s*\(|^\s*class\s+\w+\s*[(:]|"
            r"^\s*import\s+[\w.]+(?:\s+as\s+\w+)?\s*$|^\s*from\s+[\w.]+\s+import\s+[\w*(]|"
            r"^\s*(?:function|const|let|var)\s+\w+\s*[=(]|"
            r"^\s*(?:public|private|protected|static)\s+[\w<>\[\]]+\s+\w+|"
            r"^\s*#(?:include|define|ifdef|ifndef|endif|!)|^\s*(?:>>>|\.\.\.)\s|^\s*\$ \w|"
            r"^\s*(?://|/\*|\*/|<!--)|^\s*(?:if|elif|while|with|for|except|try|else|finally)\b"
            r"[^:]*:\s*$|^\s*[a-z_][\w.]*(?:\[[^\]]*\])?\s*[-+*/|&]?=\s*\S|"
            r"^\s*[rbuf]?(?:\"\"\"|\'\'\')|^\s*[rbu]?['\"].*['\"]\s*,?\s*(?:#.*)?$",
            r"[{}]\s*$|\)\s*;\s*$|^\s*[})\]]|\)\s*:\s*$|==|!=|=>|&&|\|\||\+=",
            r"^\s*\[?\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}|^\s*\[?\d{2}:\d{2}:\d{2}|"
            r"^\s*\w{3} +\d{1,2} \d{2}:\d{2}:\d{2}|\[\d{2}/\w{3}/\d{4}|"
            r"\[(?:INFO|DEBUG|WARN|WARNING|ERROR|CRITICAL|FATAL|TRACE)\]|"
            r"^\s*(?:INFO|DEBUG|WARN|WARNING|ERROR|CRITICAL|FATAL|TRACE)\b[:\s-]",
            r"^\s*Traceback \(most recent call last\)|^\s*File \"[^\"]+\", line \d+|"
            r"^\s*at [\w.$<>]+\(|^\s*\w+(?:Error|Exception|Warning):|^\s*Caused by:",
            r"</?[a-zA-Z][\w-]*(?:\s[^<>]*)?/?>|&(?:nbsp|amp|lt|gt|quot|#\d+);|<!DOCTYPE",
            r"^\s*#{1,6}\s|^\s*[=\-~^*]{3,}\s*$|^\s*\|.*\|\s*$|^\s*\.\. [\w-]+::|::\s*$|"
            r"^\s*:[\w ]+:|!\[[^\]]*\]\(|\[[^\]]+\]\((?:https?:|/|#)",
            r"^\s*>|^On .{4,80} wrote:$|^(?:From|To|Cc|Bcc|Subject|Sent|Date|Reply-To): |"
            r"^-{2,} ?(?:Original|Forwarded) [Mm]essage",
            r"^(?: {4,}|\t)\S|^\s*\*\w[\w ]*\*\s",
        )
    ),
    re.MULTILINE,
)


def extract_instructions(text: str) -> tuple[str, ...]:
    """The user's explicit instructions in `text`: imperative sentences and rule sentences.

    A sentence is an instruction when it starts with an imperative (after an optional
    "please" / "por favor") or states a rule or a limit (`kind_of`), in English, Portuguese or
    Spanish. Questions are not instructions. Deterministic; order kept, duplicates dropped.
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
    plain = _plain(sentence)
    if _TO_AI.search(plain):
        return False
    return _is_rule(plain) or _is_imperative(plain) or bool(_LIMITED.search(plain))


def kind_of(sentence: str) -> str | None:
    """What a user's sentence is worth carrying as: "rule", "constraint", "fact",
    "preference", or None (see the module docstring)."""
    plain = _plain(sentence)
    if not plain or plain.endswith("?") or looks_pasted(plain) or _TO_AI.search(plain):
        return None
    if _LIMITED.search(plain):
        return "constraint"
    if _is_rule(plain) or _LIFTS.search(plain):
        return "rule"
    if value_spans(plain) or _GOALS.search(plain):
        return "fact"
    if _is_imperative(plain) or _LIKES.search(plain):
        return "preference"
    return None


def changes(sentence: str) -> bool:
    """Whether a sentence says that something changed or is lifted ("now", "again", "no
    longer", "instead", "forget", "feel free", ...)."""
    return _CHANGED.search(sentence) is not None or _LIFTS.search(sentence) is not None


def looks_pasted(line: str) -> bool:
    """Whether a line looks pasted rather than typed: code, a log line, a stack trace, markup
    (HTML, Markdown or reST structure), a quoted mail line or header, an indented block."""
    return _PASTED_LINE.search(line) is not None


def value_spans(sentence: str) -> tuple[tuple[int, int], ...]:
    """Where `sentence` holds exact values (amounts, numbers with units, dates, times,
    versions, paths, URLs, codes); a bare small number alone is not one."""
    found = [m.span() for m in _VALUE.finditer(sentence) if not _BARE_NUMBER.match(m.group())]
    found += [m.span() for m in _WORDED_VALUE.finditer(sentence)]
    return tuple(sorted(found))


def content_words(sentence: str) -> frozenset[str]:
    """What a sentence is about: its words of three letters or more (stemmed, without
    accents), and its small numbers ("Server 3 ..." is another point than "Server 4 ..."),
    without its exact values, rule words, words of change and function words. Two
    statements on the same point share most of them."""
    plain = _plain(sentence)
    for start, end in reversed(value_spans(plain)):
        plain = plain[:start] + " " + plain[end:]
    plain = _CHANGED.sub(" ", _LIFTS.sub(" ", RULE_WORDS.sub(" ", plain)))
    return frozenset(
        _stem(word) for word in _WORD.findall(plain.lower()) if word not in _STOP_WORDS
    )


def _stem(word: str) -> str:
    """A crude stem, enough to tell two wordings of one point: accents dropped, an English
    inflection removed, then the first five letters ("deploys", "deploying" -> "deplo")."""
    word = _ACCENTS.sub("", unicodedata.normalize("NFKD", word))
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            break
    return word[:5]


def _plain(sentence: str) -> str:
    return sentence.replace("’", "'").strip()


def _is_rule(plain: str) -> bool:
    if _BANS.search(plain) or _MUSTS.search(plain):
        return not _NOT_RULES.match(_POLITE.sub("", plain.lstrip("¡¿ ")))
    first = _first_word(plain)
    return first in _NEGATIONS and not _NOT_RULES.match(_POLITE.sub("", plain.lstrip("¡¿ ")))


def _is_imperative(plain: str) -> bool:
    return _first_word(plain) in _STARTS


def _first_word(plain: str) -> str:
    words = _POLITE.sub("", plain.lstrip("¡¿ ")).lower().split(maxsplit=1)
    return words[0].rstrip(":") if words else ""
