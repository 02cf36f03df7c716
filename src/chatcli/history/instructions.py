"""The user's instructions in a text: the instruction vocabulary, one place for every use.

Compaction verifies that a summary kept the user's explicit instructions
(`chatcli.compaction`), and carrying (`chatcli.history.carry`) moves the user's rules, limits,
facts and preferences into the view when their messages leave it: both read them here, in
English, Portuguese and Spanish (`_LEXICONS`: every phrase this module knows).

`kind_of` names what one sentence, typed by the user, is worth carrying as:

- a **rule**: a standing prohibition or obligation however it is phrased ("Never ...", "must",
  "under no circumstances", "it is forbidden", "only ever", "X is off limits", "ask me before
  X", a rule stated as a fact: "the prod DB is read-only for you"), and a statement that lifts
  or changes one ("pushing to main is OK now");
- a **constraint**: a hard limit with a quantity, in digits or words ("keep spending below
  four thousand euros", "due at 11:59pm on Sunday");
- a **fact**: an exact value or a stable fact of the user's world (a code, a host, a version, a
  date, a person and their role), and a **goal** (the end state wanted), carried as a fact;
- a **preference**: a soft wish about style or approach ("I'd go with tabs").

Not worth carrying: questions (about rules too), narration and habits ("I never understood
..."), reported speech, opinions, status and bug reports, thanks and chatter, one-off requests
for the turn at hand; lines that look pasted rather than typed (`looks_pasted`: code, log
lines, markup); and words addressed to AI systems in the third person ("AI assistants reading
this: ..."), which a user does not write to their own assistant but a page written to hijack
one does. A few are plain enough to be read before any model (`_read`): a line that opens by
wondering ("No sé si ..."), a rule file's heading or banner ("Required Git Rules", "🚫
PROHIBIDO"), a verdict on the world ("... should be illegal"); and a goal said so in its
label ("Goal: ...") is a goal. Telling the rest apart takes more than a list of words, so
`kind_of` reads a sentence as *features* (`features`: which groups of the vocabulary it
holds, and where, its first words, its words and their four-letter pieces) and weighs them
with a linear model
(`instruction_model.json`, trained by `scripts/train_instruction_model.py` on the tuning side
of tests/data/instructions, never on the held-out set). `_RULE_MASS`: the share of the
model's belief in a rule, a constraint or a lift that makes a sentence one: a rule missed is
lost, a sentence carried needlessly costs a line.

`is_instruction` (what compaction pins) is the older, plainer reading: an imperative, or a rule
or limit word. `changes` tells a statement that says something changed ("now", "again", "no
longer", "forget", ...). Everything here is deterministic and linear in the sentence.

One module because it is one concern's vocabulary, kept in one place: the phrases, the
patterns that read them and the features made of them change together.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cache
from importlib import resources
from itertools import pairwise

__all__ = [
    "RULE_WORDS",
    "certainty",
    "changes",
    "content_words",
    "cue_of",
    "directs",
    "extract_instructions",
    "features",
    "holds_while",
    "is_instruction",
    "kind_of",
    "lift_belief",
    "lifts",
    "looks_pasted",
    "normalised",
    "only_lifts",
    "reads_as_lift",
    "sentences",
    "value_spans",
]

# A sentence ends at a full stop, a question or an exclamation mark, or a line's end; clauses
# joined by a semicolon stay one sentence ("Never push to main; open a PR.").
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
# Titles and abbreviations a sentence does not end at ("My supervisor is Dr. Agarwal."),
# lower case, without their full stop; "No." and "etc." often end one, so they are not here.
_NO_END = frozenset(
    [
        "dr",
        "dra",
        "mr",
        "mrs",
        "ms",
        "prof",
        "profa",
        "sr",
        "sra",
        "srta",
        "st",
        "jr",
        "e.g",
        "i.e",
        "vs",
        "approx",
        "aprox",
        "p.ex",
    ]
)

# Every phrase, by group and language (comma-separated, lower case; a phrase matches as whole
# words, any spacing between them, with or without accents). The groups:
#   polite: words before an imperative ("please"); starts: first words of an imperative;
#   negations: a first word that makes an imperative a prohibition ("No borres ...");
#   not_rules: openings that look like a ban but are not ("no problem");
#   bans / musts / asks: prohibitions, obligations, "ask me before";
#   lifts: lifting or changing a rule; changed: a word saying something changed;
#   limits (before a quantity), deadlines (before a date or time), numbers, dates, units;
#   likes: a preference; goals: an end state;
#   reported, narrative, opinion, status, thanks, requests, notes: what is not an instruction
#   (opinion_opening: an opinion only as a sentence's opening, "To me, ..." not "back to me");
#   standing: a rule's scope ("every", "cada"); norms: a rule's warrant ("that's the
#   policy", "é a regra", "sin excepciones"); conditional, questions, first_person, you:
#   who speaks and how; tags: a question tag at the end ("okay?", "¿me entendés?");
#   moves: a whole sentence that only moves the turn on ("Go on.", "Dale.");
#   disavowed: someone else's rule, doubted or declined ("I don't buy it", "eso es cosa suya");
#   reminded: the user pointing back at what they said ("I told you", "te dije", "eu falei");
#   habitual: what keeps happening ("every single time", "toda vez que", "es lo mismo").
_LEXICONS: dict[str, dict[str, str]] = {
    "en": {
        "polite": "please, pls, kindly, plz",
        "starts": "add, allow, always, answer, apply, ask, avoid, back, bake, build, bump, call, "
        "change, check, clarify, clean, close, commit, configure, confirm, connect, consider, "
        "copy, create, debug, delete, deploy, describe, disable, do, document, don't, dont, "
        "drop, edit, email, enable, ensure, escalate, explain, export, fix, follow, format, "
        "generate, give, go, guide, handle, hold, ignore, implement, import, include, inform, "
        "install, keep, leave, let, limit, list, log, look, make, mark, merge, mention, "
        "migrate, move, name, never, note, notify, open, pass, pause, pin, post, prefer, print, "
        "prioritize, push, put, read, rebase, record, reduce, refactor, refer, register, "
        "reject, release, remember, remove, rename, reply, report, reset, respect, respond, "
        "restart, rethink, return, review, rewrite, round, run, save, send, set, share, ship, "
        "show, skip, sort, split, squash, start, stay, stick, stop, store, submit, switch, "
        "take, talk, target, tell, test, touch, track, translate, treat, try, turn, update, "
        "upgrade, upload, use, validate, verify, wait, warn, write",
        "negations": "no, never, don't, dont, do not, absolutely no, strictly no",
        "not_rules": "no problem, no worries, no thanks, no thank you, no idea, no way, no rush, "
        "no hurry, no luck, no change, no changes, no",
        "bans": "never, don't, dont, do not, not allowed, not permitted, not authorized, "
        "forbidden, prohibited, banned, off limits, off-limits, out of bounds, "
        "under no circumstances, in no case, on no account, at no time, no matter what, "
        "no-go, not for touching, hands off, stay away, keep away, refrain, avoid, must not, "
        "mustn't, shall not, should not, shouldn't, you may not, you can't, you cannot, "
        "you can not, you are not, you're not, is not to, are not to, not to be, not even",
        "musts": "always, must, has to, have to, need to, needs to, shall, required, requires, "
        "mandatory, compulsory, obligatory, make sure, ensure, be sure to, remember to, "
        "don't forget, it is essential, only, only ever, exclusively, solely, nothing else, "
        "at all times, every time, without exception, without fail, is to be, are to be, "
        "you are to, read-only, read only, locked, reserved for, restricted to, limited to, "
        "strictly, no exceptions, i want you to, i'd like you to, i would like you to, "
        "i need you to, i expect you to",
        "asks": "ask before, ask me, check with me, ask first, talk to me first, "
        "ask for approval, needs my approval, need my approval, without asking, without my, "
        "without approval, without permission",
        "lifts": "is fine now, are fine now, is ok now, are ok now, is okay now, fine now, "
        "ok now, okay now, feel free, fair game, go ahead, allowed again, is allowed, "
        "are allowed, is lifted, are lifted, lifted, is over, no longer, not anymore, "
        "anymore, any more, don't need, do not need, doesn't apply, does not apply, ignore my, "
        "ignore what i said, ignore the earlier, forget what i said, forget about, is yours, "
        "are yours, all yours, i trust you, back on, is back, are back, free now, acceptable, "
        "from now on, from today, starting today, after all, as needed, whatever you need, "
        "granted, you can now, can now, you may, you can, is gone, are gone, no longer applies, "
        "from here on, edit away, fire away, have at it, go for it, knock yourself out, "
        "green light, greenlit, green-lit, unblocked, unfrozen, cleared to, drop the cap, "
        "drop the limit, lift the cap, lift the limit, remove the cap, remove the limit, "
        "scrap the cap, scrap the limit, no cap, no limit",
        "changed": "now, again, instead, actually, correction, update, updated, changed, "
        "change, switch, bump, bumped, upgraded, moved, slipped, renamed, rotated, new, "
        "revised, cancel, cancelled, canceled, not needed, never mind, nevermind, scratch, "
        "forget, ignore, disregard, fine, ok, okay, allowed, permitted, free to, back, rather, "
        "make it, gone, topped up, went up, raised, lowered, goes up, go up, goes down, "
        "go down, went down, drops to, dropped to, drop to, cut to, reduced, increased, "
        "decreased, extended, shortened, tightened, relaxed, loosened, as of, from next, "
        "starting next, effective, pushed back, postponed, brought forward, pushed",
        "limits": "at most, at least, no more than, no less than, not more than, "
        "not less than, no fewer than, up to, maximum, max, minimum, min, limit, limited, "
        "cap, capped, ceiling, budget, within, under, below, above, over, beyond, exceed, "
        "exceeds, exceeding, less than, more than, fewer than, lower than, higher than, "
        "greater than, shorter than, longer than, wider than, taller than, bigger than, "
        "larger than, smaller than, heavier than, tops, threshold, at or below, at or above, "
        "capacity, or fewer, or less, or under",
        "deadlines": "deadline, due, before, by, after, until, till, no later than, "
        "no earlier than, from",
        "numbers": "zero, one, two, three, four, five, six, seven, eight, nine, ten, eleven, "
        "twelve, thirteen, fourteen, fifteen, sixteen, seventeen, eighteen, nineteen, "
        "twenty, thirty, forty, fifty, sixty, seventy, eighty, ninety, hundred, thousand, "
        "million, billion, dozen, half, a couple of, a few",
        "dates": "monday, tuesday, wednesday, thursday, friday, saturday, sunday, tomorrow, "
        "tonight, noon, midnight, eod, end of day, end of the day, end of the week, "
        "end of the month, next week, january, february, march, april, june, july, august, "
        "september, october, november, december",
        "units": "euro, euros, eur, dollar, dollars, usd, pound, pounds, gbp, cent, cents, "
        "percent, per cent, second, seconds, minute, minutes, hour, hours, day, days, week, "
        "weeks, month, months, year, years, line, lines, character, characters, word, words, "
        "token, tokens, request, requests, retry, retries, attempt, attempts, file, files, "
        "item, items, user, users, step, steps, call, calls, page, pages, paragraph, "
        "paragraphs, megabyte, megabytes, gigabyte, gigabytes, person, people, times",
        "likes": "prefer, prefers, preferred, i'd rather, would rather, rather than, i like, "
        "i love, i'd go with, personally, would be nice, if possible, where possible, "
        "kinda like, would appreciate, is easier, not a hard rule, i want, i'd like, "
        "my preference, when possible, whenever possible, whenever you can, if you can, "
        "where practical, when practical, if feasible, if it's no trouble, ideally",
        "unsure": "not sure if, not sure whether, no idea if, no idea whether, i wonder if, "
        "i wonder whether, wondering if, wondering whether, don't know if, don't know whether, "
        "dont know if, do not know if, dunno if, not clear if, not clear whether, unclear if, "
        "unclear whether, can't tell if, cant tell if, can't tell whether, trying to work out "
        "if, trying to figure out if, still figuring out if, unsure if, unsure whether, "
        "not certain if, not certain whether, in two minds about whether",
        "goals": "end state, end goal, goal, goals, objective, target is, aim to, we aim, "
        "what i want, at the end i want, i want the, i want a, by the end, the plan is",
        "reported": "says, said, say that, keeps saying, keep saying, noted that, "
        "indicated that, has indicated, told me, tells me, mentioned, according to, claims, "
        "insists, maintains, feels that, reckon, reckons, swears, is convinced, they say, "
        "people say",
        "disavowed": "i don't buy it, i dont buy it, i do not share, i don't share, i disagree, "
        "i don't agree, i'm not convinced, i am not convinced, i doubt it, not my problem, "
        "not your job, not our job, their call, his call, her call, their project, "
        "whatever they say, as he wishes, as she wishes, his business, her business, "
        "up to them, if you ask me, nonsense, old wives",
        "reminded": "i said, i told you, i asked you, i had asked, i've told you, i have told "
        "you, i already said, like i said, as i said",
        "narrative": "yesterday, last year, last week, last month, last semester, "
        "last quarter, last time, ago, previous, previously, before this, back in, used to, "
        "was, were, had, did, got, went, told, happened, sooner or later, back when, "
        "in the old days, before we had, we'd always, in the eighties, in the nineties, "
        "for years, in my day, back then, years ago",
        "habitual": "every time, every single time, each time, without fail, like clockwork, "
        "invariably, it's always the same, same every",
        "norms": "that's how it works, that is how it works, that's the rule, that is the "
        "rule, company rule, house rule, that's the policy, that is the policy, has a policy, "
        "our policy, company policy, that's the law, it's the law, state cap, no exceptions, "
        "no negotiating, non-negotiable, no discussion, full stop, end of story, "
        "that's the limit, hard limit, hard cap, hard date, hard deadline",
        "opinion": "i think, honestly, frankly, in my view, in my opinion, imo, "
        "as far as i'm concerned, ridiculous, excessive, overrated, too strict, too long, "
        "i know, is so, is too, is my favorite, should be forbidden, should be enforced, "
        "should be banned, should be illegal, should be outlawed, should be fined, "
        "ought to be banned, ought to be illegal, ought to be outlawed, "
        "is killing me, so confusing, is weird, it strikes me, it seems to me, seems to me",
        "opinion_opening": "for me, to me",
        "status": "error, errors, fails, failed, failing, crash, crashes, crashed, timeout, "
        "timeouts, exception, returns, stuck, broken, doesn't work, does not work, "
        "not working, works now, it works, passes, passed, green, finished, concluded, "
        "is up, pending, matched, nothing happens, wont work, won't work, won't let me, "
        "wont let me, doesn't let me, keeps crashing, won't load",
        "thanks": "thanks, thank you, thx, cool, nice, perfect, great, lol, brb, hello, "
        "good morning, ugh",
        "requests": "can you, could you, would you, will you, can u, help me, explain me, "
        "tell me, show me, look at, take a look, draft, summarise, summarize",
        "notes": "note, notes, note to self, meeting notes, todo, to do, bug, idea, done, fyi, "
        "retro, stats, question, question for later, numbers, status",
        "standing": "every, each, any, all, whenever, every time, in every, before every, "
        "before each, all new",
        "conditional": "if, when, whenever, unless",
        "questions": "should, shall, is, are, do, does, did, can, could, would, will, must, "
        "may, have, has, what, what's, whats, why, how, which, who, where, when",
        "first_person": "i, i'm, im, i've, i'd, we, we're, we've, my, let me, let's, lets, let us",
        "you": "you, your, you're, yourself",
        "tags": "okay, ok, right, yes, alright, please",
        "moves": "go on, carry on, keep going, continue, next, next step, next one, try again, "
        "go, proceed, do it, do that, sure, yes, yep, ok, okay, done, stop, wait, hold on, "
        "again, go ahead, good, great, thanks, thank you",
    },
    "pt": {
        "polite": "por favor, por gentileza, porfa",
        "starts": "adicione, altere, apague, atualize, certifique-se, coloque, comece, confira, "
        "considere, corrija, crie, deixe, documente, escreva, evite, execute, explique, faça, "
        "formate, garanta, gere, ignore, implemente, inclua, leia, lembre, lembre-se, liste, "
        "mantenha, mostre, mude, pare, prefira, remova, renomeie, responda, rode, siga, "
        "traduza, troque, use, usa, utilize, verifique, fique, envie, trabalhe, fixe, fixa, "
        "roda, sobe, suba, responde, escreve, manda, mande, fala, faz, para, pergunte, avise, "
        "aguarde, espere, desligue, desliga, ligue, chame, chama, encaminhe, encaminha, apaga, "
        "guarde, guarda, salve, separe, anote, anota, registre, registra, confirme, confirma, "
        "cheque, checa, cobre, pague, peça, pede, ponha, bote, bota, tire, tira, teste, "
        "revise, revisa, calcule, devolva, agende, cancele, cancela, recuse, bloqueie, "
        "bloqueia, desative, desativa, ative, limpe, feche, fecha, abra, abre, imprima, "
        "informe, informa, copie, mova, arquive, exclua, exclui, descarte, descarta, priorize, "
        "prioriza, trate, encerre, encerra, repasse, diga, conte, coloca, inclui, "
        "adiciona, atualiza, cria, corrige, gera, muda, remove, troca, utiliza, verifica, "
        "escolha, escolhe, comunique, notifique, notifica, explica, deixa",
        "negations": "não, nunca, jamais, nada de, nenhum, nenhuma, nem",
        "not_rules": "não, nunca mais",
        "bans": "nunca, jamais, não deve, não devem, não pode, não podem, não é permitido, "
        "não são permitidos, não está permitido, não está autorizado, proibido, proibida, "
        "proibidos, proibidas, vedado, vedada, em hipótese alguma, em hipótese nenhuma, "
        "em nenhuma hipótese, sob nenhuma circunstância, sob hipótese alguma, em caso algum, "
        "em nenhum caso, de jeito nenhum, de forma alguma, de modo algum, nem pensar, "
        "fora dos limites, fora de limites, fora do seu escopo, fora de cogitação, intocável, "
        "nada de, ninguém, não é pra, não eh pra, não mexa, não toque, evite, evitar, para de, "
        "pare de, nunca mais, nem sequer",
        "musts": "sempre, deve, devem, deverá, tem que, têm que, tem de, têm de, tens de, "
        "temos de, precisa, precisam, é obrigatório, obrigatório, obrigatória, "
        "obrigatoriamente, certifique-se, garanta, lembre-se, somente, apenas, só, "
        "exclusivamente, unicamente, sem exceção, de leitura, só leitura, quero que, "
        "preciso que, gostaria que, reservado para, restrito a, limitado a",
        "asks": "me pergunte, pergunta-me, me perguntar, me avisa, me avise, sem me avisar, "
        "sem me perguntar, passa por mim, sem autorização, sem pedido",
        "lifts": "pode, podem, já pode, já podes, pode voltar a, está liberado, está liberada, "
        "liberado, liberada, liberou, tudo bem agora, está ok agora, esqueça o que eu disse, "
        "esqueça, esquece, ignore o que eu disse, desconsidere, não precisa mais, "
        "não precisam mais, não é mais, não vale mais, deixa pra lá, voltou, está de volta, "
        "daqui pra frente, a partir de agora, a partir de hoje, fica à vontade, "
        "fique à vontade, à vontade para, à vontade pra, é todo seu, é toda sua, sem medo, "
        "pode mexer, sinal verde, luz verde, manda ver, "
        "sinta-se livre, tira o limite, sem limite, acabou o limite, derruba o limite, "
        "libera, liberar, liberei, libero, dá pra, dá para",
        "changed": "agora, de novo, novamente, em vez, ao invés, na verdade, correção, "
        "atualização, mudou, mudança, trocamos, migramos, aumentaram, adiada, adiado, "
        "renomeado, esqueça, ignore, desconsidere, liberado, liberada, pode, podem, voltou, "
        "a partir de agora, cancelado, cancelada, não precisa, livre, tá livre, está livre, "
        "subiu, subiram, baixou, caiu, passou para, passou pro, novo, nova, mudamos, "
        "antecipado, antecipada, apertou, apertaram, reduziu, reduzimos, reduziram, "
        "aumentou, aumentamos, diminuiu, diminuimos, baixamos, baixaram, subimos, "
        "cai para, sobe para, desce para, passa a, passa para, a partir de, adiou, adiaram, "
        "adiamos, atrasou, antecipou, antecipamos, prolongamos, prorrogamos, passam a, "
        "prorrogou, estendemos, estendeu",
        "limits": "no máximo, no mínimo, pelo menos, ao menos, até, abaixo de, acima de, "
        "menos de, mais de, "
        "não ultrapassar, não ultrapasse, não exceder, não exceda, não passar de, "
        "não passe de, passar de, passe de, limite, teto, máximo, mínimo, máxima, mínima, "
        "orçamento, capacidade, lotação, dentro de, "
        "inferior a, "
        "superior a, não mais de, ou menos",
        "deadlines": "prazo, antes de, antes da, antes das, antes do, depois de, a partir de, "
        "até o, até a, até as, até dia, entrega",
        "numbers": "zero, dois, duas, três, quatro, cinco, seis, sete, oito, nove, dez, onze, "
        "doze, treze, quatorze, catorze, quinze, dezesseis, dezessete, dezoito, dezenove, "
        "vinte, trinta, quarenta, cinquenta, sessenta, setenta, oitenta, noventa, cem, "
        "cento, duzentos, duzentas, trezentos, trezentas, quatrocentos, quatrocentas, quinhentos, "
        "quinhentas, seiscentos, setecentos, oitocentos, novecentos, mil, milhão, milhões, "
        "bilhão, meia, meio, dúzia",
        "dates": "segunda, terça, quarta, quinta, sexta, sábado, domingo, amanhã, meio-dia, "
        "meia-noite, janeiro, fevereiro, março, abril, maio, junho, julho, agosto, setembro, "
        "outubro, novembro, dezembro, fim do dia, fim do mês, semana que vem",
        "units": "euro, euros, real, reais, dólar, dólares, por cento, segundo, segundos, "
        "minuto, minutos, hora, horas, dia, dias, semana, semanas, mês, meses, ano, anos, "
        "linha, linhas, caractere, caracteres, palavra, palavras, tentativa, tentativas, "
        "arquivo, arquivos, usuário, usuários, pessoa, pessoas, vezes, páginas, frases",
        "likes": "prefiro, eu prefiro, preferir, gosto, gosto de, eu gosto, gostava, curto, "
        "se puder, se der, não é regra, mais do que, minha preferência, se possível, "
        "sempre que possível, quando possível, de preferência, se não for trabalho, "
        "idealmente, se não der trabalho",
        "unsure": "não sei se, não tenho certeza se, não tenho a certeza se, "
        "não faço ideia se, não percebi se, ainda não percebi se, não entendi se, "
        "fico na dúvida se, tenho dúvida se, me pergunto se, pergunto-me se, queria saber se, "
        "gostava de saber se, não está claro se, não sei bem se, em dúvida se, na dúvida se",
        "goals": "nosso objetivo, o objetivo, meu objetivo, objetivo final, a meta, nossa meta, "
        "o alvo, o plano é, quero terminar, quero chegar, quero acabar, quero esse, "
        "quero um, quero uma",
        "reported": "diz que, disse que, falou que, vive dizendo, diz sempre, comentou, falou, "
        "fala que, falava que, dizia que, dizem que, jura que, garante que, acha que",
        "disavowed": "não acredito, eu não acredito, não concordo, discordo, duvido, "
        "problema dele, problema dela, coisa dele, coisa dela, mostram o contrário, "
        "não é bem assim, bobagem, besteira, lenda",
        "reminded": "eu falei, eu disse, eu pedi, te falei, te disse, te pedi, já falei, "
        "já disse, eu tinha dito, eu tinha pedido, como eu disse",
        "narrative": "ontem, ano passado, semestre passado, semana passada, última vez, "
        "na minha, na empresa anterior, foi, era, tinha, tivemos, teve, ficamos, fiquei, "
        "reprovei, derrubou, caiu, mais cedo ou mais tarde, cedo ou tarde, tínhamos de, "
        "tínhamos que, antigamente, naquela época, no início, costumávamos, costumava, "
        "no começo, no meu tempo, durante anos, há anos",
        "habitual": "toda vez, toda vez que, todo santo dia, é sempre a mesma coisa, "
        "é sempre assim, sem falta",
        "norms": "é a regra, é regra, é norma, é a norma, é lei, é a lei, sem exceção, "
        "sem exceções, política da empresa, política do escritório, não se negocia, "
        "sem negociação, ponto final, regra da casa, assim que funciona",
        "opinion": "acho, acho que, sinceramente, na minha opinião, "
        "devia ser, deveria ser, devia estar, exagero, muito estranho, inaceitável, "
        "ridículo, porcaria, horrível, eu sei, superestimado",
        "opinion_opening": "pra mim, para mim, a meu ver, no meu entender, na minha visão",
        "status": "erro, falha, falhou, travou, não funciona, funcionou, funcionando normal, "
        "não me deixa, ficou fora do ar, saiu do ar, desarmou, "
        "deu isso, subiu, terminou, pronto, passou",
        "thanks": "obrigado, obrigada, valeu, brigadão, vlw, bom dia, socorro, show",
        "requests": "me explica, explica-me, podes explicar, você pode, vc pode, consegue, "
        "me ajuda, me revisa, me faz, olha esse, olha isso",
        "notes": "lembrete, obs, feito, pergunta, reunião, números, pendente",
        "standing": "todo, toda, todos, todas, cada, qualquer, sempre que, toda vez, antes de cada",
        "conditional": "se, quando, caso",
        "questions": "qual, quais, por que, porque, pq, como, quando, onde, o que, quem, "
        "será, tem, quanto, quantos, quantas, preciso, tenho, pode, podes",
        "first_person": "eu, a gente, nós, meu, minha, deixa eu, deixa-me, me deixa",
        "you": "você, voce, vc, tu, ti, te, seu, sua",
        "tags": "entendeu, entendido, tá, ta, né, ne, sim, ok",
        "moves": "continua, continue, segue, pode seguir, próximo, próxima, vai, manda ver, "
        "tenta de novo, beleza, ok, sim, valeu, isso, pode ser, certo",
    },
    "es": {
        "polite": "por favor, porfa, porfavor",
        "starts": "actualiza, agrega, añade, asegúrate, asegurate, borra, cambia, comprueba, "
        "considera, corrige, corrija, crea, deja, documenta, elimina, empieza, envía, "
        "escribe, escriba, evita, explica, explique, genera, haga, haz, ignora, implementa, "
        "incluye, lee, mantén, mantenga, muestra, pon, prefiere, quita, recuerda, renombra, "
        "responde, responda, revisa, traduce, usa, use, usá, utiliza, verifica, quédate, "
        "limita, trabaja, conéctate, conectate, pasa, contesta, manda, sigue, pregunta, "
        "avisa, espera, corre, ejecuta, sube, apaga, desconecta, llama, deriva, asume, anota, "
        "registra, confirma, cobra, paga, pide, guarda, separa, cancela, rechaza, acepta, "
        "bloquea, desactiva, activa, limpia, cierra, abre, imprime, informa, mueve, archiva, "
        "descarta, prioriza, trata, reporta, reenvía, di, dile, coloca, agrega, cuida, "
        "calcula, devuelve, redacta, resume, marcá, pasá, decí, mandá, avisá, llamá, poné, "
        "hacé, fijate, anotá, cerrá, abrí, revisá, chequeá, chequea, valida, testea, "
        "comunica, notifica, guardá, borrá, cambiá, agregá, escribí, respondé",
        "negations": "no, nunca, jamás, jamas, ni, nada de, ningún, ninguna",
        "not_rules": "no, no hay problema, no pasa nada, no gracias, ni idea",
        "bans": "nunca, jamás, jamas, no debes, no debe, no deben, no puedes, no podés, "
        "no puede, no pueden, no se puede, no se permite, no está permitido, "
        "no están permitidos, prohibido, prohibida, prohibidos, prohibidas, vedado, "
        "zona vedada, bajo ninguna circunstancia, bajo ningún concepto, por ningún motivo, "
        "en ningún caso, en ninguna circunstancia, de ninguna manera, de ningún modo, "
        "ni se te ocurra, ni lo mires, ni hablar, fuera de tu alcance, fuera de los límites, "
        "fuera de límites, nadie, evita, evitar, no toques, deja de, ni siquiera, "
        "nada de",
        "musts": "siempre, debes, debe, deben, deberás, tienes que, tenés que, tiene que, "
        "tienen que, hay que, es obligatorio, obligatorio, obligatoria, obligatoriamente, "
        "asegúrate, asegurate, recuerda, solo, sólo, solamente, únicamente, exclusivamente, "
        "sin excepción, en todo momento, solo lectura, de solo lectura, de lectura, "
        "quiero que, necesito que, me gustaría que, reservado para, restringido a, "
        "limitado a",
        "asks": "pregúntame, preguntame, pregunta antes, consúltame, consultame, "
        "me la consultas, avísame, avisame, sin preguntar, sin autorización, sin ticket",
        "lifts": "puedes, podés, pueden, ya puedes, ya podés, ya se puede, puedes volver a, "
        "está bien ahora, ya está bien, olvida lo que dije, olvida, olvídate, "
        "ignora lo que dije, no hace falta, ya no, ya no es, ya no hay, ya no aplica, volvió, "
        "está de vuelta, queda permitido, está permitido, es tuyo, es tuya, quedó libre, "
        "a partir de ahora, desde hoy, ahora sí, sin problema, nomás, adelante, "
        "dieron el ok, visto bueno, puede, ya están permitidas, ya están permitidos, "
        "están permitidas, están permitidos, vuelven a estar libres, vuelve a estar libre, "
        "a cualquier hora, sin miedo, luz verde, vía libre, tienes permiso, tenés permiso, "
        "quita el límite, sin límite, se acabó el límite",
        "changed": "ahora, de nuevo, otra vez, ya no, en vez, en lugar, en realidad, "
        "corrección, actualización, cambió, cambio, cambiamos, subimos, corrijo, se atrasa, "
        "pasó al, nos subieron, olvida, olvídate, ignora, permitido, puedes, pueden, volvió, "
        "a partir de ahora, cancelado, cancelada, no hace falta, libre, quedó libre, puede, "
        "permitidas, permitidos, libres, vuelven a, vuelve a, subió, bajó a, bajó de, pasó a, "
        "nuevo, "
        "nueva, movimos, adelantaron, adelantado, adelantada, bajamos, bajaron, baja a, "
        "sube a, subieron, redujimos, redujeron, reducimos, aumentamos, aumentaron, "
        "ampliamos, ampliaron, apretaron, pasa a, pasamos a, a partir de, a partir del, "
        "adelantó, atrasó, retrasó, pospuso, pospusimos, aplazó, aplazamos, postergó, "
        "postergamos, prorrogamos, prorrogó, extendimos, extendió, pasan a, pasaron a, "
        "desde el lunes, desde el martes, desde el miércoles, desde el jueves, "
        "desde el viernes, desde mañana, desde la semana que viene",
        "limits": "como máximo, como mínimo, como mucho, a lo sumo, al menos, por lo menos, "
        "hasta, por debajo de, "
        "por encima de, menos de, más de, no superar, no superes, no exceder, no excedas, "
        "no pasar de, no pases de, pasar de, pase de, límite, tope, máximo, mínimo, máxima, "
        "mínima, aforo, capacidad, "
        "presupuesto, dentro de, "
        "inferior a, superior a, no más de, o menos",
        "deadlines": "plazo, antes de, antes del, después de, a partir de, hasta el, "
        "hasta las, hasta la, entrega, se entrega",
        "numbers": "cero, dos, tres, cuatro, cinco, seis, siete, ocho, nueve, diez, once, doce, "
        "trece, catorce, quince, dieciséis, diecisiete, dieciocho, diecinueve, veinte, "
        "treinta, cuarenta, cincuenta, sesenta, setenta, ochenta, noventa, cien, ciento, "
        "doscientos, doscientas, trescientos, trescientas, cuatrocientos, cuatrocientas, "
        "quinientos, quinientas, seiscientos, setecientos, ochocientos, novecientos, mil, "
        "millón, millones, media, medio, docena",
        "dates": "lunes, martes, miércoles, jueves, viernes, sábado, domingo, mañana, "
        "mediodía, medianoche, enero, febrero, marzo, abril, mayo, junio, julio, agosto, "
        "septiembre, octubre, noviembre, diciembre, fin de mes, la semana que viene",
        "units": "euro, euros, dólar, dólares, peso, pesos, por ciento, segundo, segundos, "
        "minuto, minutos, hora, horas, día, días, semana, semanas, mes, meses, año, años, "
        "línea, líneas, carácter, caracteres, palabra, palabras, intento, intentos, archivo, "
        "archivos, usuario, usuarios, persona, personas, veces, páginas, diapositivas, "
        "créditos",
        "likes": "prefiero, yo prefiero, preferir, me gusta, me gustan, me copa, "
        "me viene mejor, si puedes, si podés, en lugar de, antes que, no es regla, "
        "si es posible, si se puede, de ser posible, cuando se pueda, en lo posible, "
        "de preferencia, idealmente, siempre que se pueda, si no es molestia",
        "unsure": "no sé si, no tengo claro si, no estoy seguro si, no estoy segura si, "
        "no estoy seguro de si, no estoy segura de si, me pregunto si, quisiera saber si, "
        "ni idea si, no me queda claro si, no entiendo si, no sé bien si, dudo si, "
        "tengo dudas de si, no sé muy bien si",
        "goals": "nuestro objetivo, el objetivo, mi objetivo, la meta, nuestra meta, meta final, "
        "el plan es, lo que quiero, quiero cerrar, quiero terminar, quiero un, quiero una",
        "disavowed": "no creo, yo no creo, no estoy de acuerdo, cosa suya, problema suyo, "
        "habla por hablar, dudo, no me convence, allá él, allá ella, tonterías, mito",
        "reminded": "te dije, le dije, te pedí, le pedí, le había pedido, te había dicho, "
        "ya te dije, ya le dije, como te dije, como dije",
        "reported": "dice que, dijo que, comentó que, dice siempre, siempre dice, decía que, "
        "dicen que, opina que, según él, según ella, jura que, asegura que, "
        "vive diciendo, comentó",
        "narrative": "ayer, año pasado, semana pasada, la última vez, en mi trabajo anterior, "
        "en la pega anterior, fue, había, tuvimos, tuvo, dejamos, se mandó, quedó atrapado, "
        "reprobé, tarde o temprano, a la larga, teníamos que, tenía que, antiguamente, "
        "en esa época, en aquella época, al principio, solíamos, solía, en mis tiempos, "
        "en mi época, durante años, hace años",
        "habitual": "cada vez que, todas las veces, es lo mismo, siempre lo mismo, "
        "siempre es igual, sin falta",
        "norms": "es la regla, es regla, es norma, es la norma, es ley, es la ley, "
        "sin excepción, sin excepciones, política de la empresa, no se negocia, "
        "sin negociar, punto final, punto y aparte, regla de la casa, así funciona",
        "opinion": "la verdad, honestamente, encuentro que, creo que, me parece, "
        "debería estar, debería ser, deberían, es una joda, demasiado, un desastre, "
        "geniales, tentador, ya sé, rarísimo, es cualquiera, horrible",
        "opinion_opening": "para mí, a mi juicio, a mi parecer, en mi opinión, "
        "desde mi punto de vista",
        "status": "no anda, no funciona, falla, falló, termina, terminó, listo, quedó, "
        "no me deja, se cae, se reinicia, se queda sin, "
        "rebotando, tirando, ocurre, error",
        "thanks": "gracias, genial, buenísimo, buenos días, hola, auxilio, mil gracias",
        "requests": "me explicas, me revisás, me revisas, me haces, puedes convertir, "
        "me ayudas, mira esto",
        "notes": "recordatorio, ojo, pendiente, hecho, duda, reunión, cifras",
        "standing": "todo, toda, todos, todas, cada, cualquier, cualquiera, siempre que, "
        "antes de cada",
        "conditional": "si, cuando, en caso de",
        "questions": "cual, cuales, qué, que, quién, quien, dónde, donde, cuándo, cuando, "
        "cuánto, cuantos, cuantas, hay, ha, se puede, puedo, tengo, es obligatorio",
        "first_person": "yo, nosotros, nosotras, mi, mis, déjame, dejame, dejáme",
        "you": "tú, tu, ti, vos, usted, te",
        "tags": "me entendés, me entendes, me entendiste, entendido, vale, sí, si, po",
        "moves": "sigue, seguí, continúa, continua, dale, siguiente, próximo, otra vez, "
        "intenta de nuevo, listo, ok, sí, vale, bueno, perfecto, eso",
    },
}


def _set(words: str) -> frozenset[str]:
    return frozenset(words.split())


def _strip_accents(text: str) -> str:
    if text.isascii():
        return text
    return _COMBINING.sub("", unicodedata.normalize("NFKD", text))


# The combining marks NFKD splits accented letters into.
_COMBINING = re.compile(r"[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]")


def _phrases(group: str) -> tuple[str, ...]:
    """A group's phrases in every language, as written and without accents."""
    found: dict[str, None] = {}
    for lexicon in _LEXICONS.values():
        for phrase in lexicon[group].split(","):
            if phrase.strip():
                found[phrase.strip()] = None
                found[_strip_accents(phrase.strip())] = None
    return tuple(found)


def _alternation(phrases: Iterable[str]) -> str:
    """A regex matching any of `phrases` as whole words, any spacing between their words."""
    longest_first = sorted(set(phrases), key=len, reverse=True)
    return "|".join(r"\s+".join(map(re.escape, p.split())) for p in longest_first)


def _words(*groups: str) -> re.Pattern[str]:
    phrases = [p for group in groups for p in _phrases(group)]
    return re.compile(rf"(?<![\w'-])(?:{_alternation(phrases)})(?![\w'-])", re.IGNORECASE)


def _opening(group: str) -> re.Pattern[str]:
    return re.compile(rf"^(?:{_alternation(_phrases(group))})(?![\w'-])", re.IGNORECASE)


_NOT_WORD = re.compile(r"[^\w'-]+")


def _padded(text: str) -> str:
    """`text` in lower case, without accents, every mark but apostrophes and hyphens a
    space, between spaces: a phrase is in it when its own padded form is (`_Phrases`)."""
    plain = _strip_accents(text.replace("’", "'")).lower()
    return " " + " ".join(_NOT_WORD.sub(" ", plain).split()) + " "


@dataclass(frozen=True, slots=True)
class _Phrases:
    """Phrases found by set lookups rather than a regex of alternatives (what reading every
    sentence of a long session costs): one-word phrases in `words`, longer ones padded
    (" do not ") under their first word in `longer`."""

    words: frozenset[str]
    longer: dict[str, tuple[str, ...]]

    @classmethod
    def of(cls, *groups: str, leaving: frozenset[str] = frozenset()) -> _Phrases:
        padded = {_padded(p) for g in groups for p in _phrases(g) if p not in leaving}
        padded.discard("  ")
        longer: dict[str, list[str]] = {}
        for phrase in sorted(p for p in padded if p.count(" ") > 2):
            longer.setdefault(phrase.split()[0], []).append(phrase)
        words = frozenset(p.strip() for p in padded if p.count(" ") == 2)
        return cls(words=words, longer={w: tuple(ps) for w, ps in longer.items()})

    def within(self, padded: str, tokens: frozenset[str]) -> bool:
        if not self.words.isdisjoint(tokens):
            return True
        return any(p in padded for t in tokens & self.longer.keys() for p in self.longer[t])

    def opens(self, padded: str) -> bool:
        first = padded[1 : padded.find(" ", 1)]
        return first in self.words or any(padded.startswith(p) for p in self.longer.get(first, ()))

    def removed(self, padded: str) -> str:
        """`padded` without these phrases."""
        for token in set(padded.split()) & self.longer.keys():
            for phrase in self.longer[token]:
                while phrase in padded:  # bounded: each pass removes one
                    padded = padded.replace(phrase, " ")
        return " " + " ".join(t for t in padded.split() if t not in self.words) + " "


# Any prohibition or obligation phrase.
RULE_WORDS = _words("bans", "musts")
_POLITE = re.compile(rf"^(?:{_alternation(_phrases('polite'))})(?!\w)[\s,:]*", re.IGNORECASE)
_STARTS = frozenset(_phrases("starts"))
_NEGATIONS = _opening("negations")
_NOT_RULES = re.compile(
    rf"^(?:{_alternation(_phrases('not_rules'))})(?:[\s,.!:;]*$|\s*[,.!:;])", re.IGNORECASE
)
_RULES = _Phrases.of("bans", "musts")
_LIFTS = _Phrases.of("lifts")
_CHANGED = _Phrases.of("changed")
# The words that make a limit, but its nouns ("the budget", "the cap"): what a limit is about.
_LIMIT_NOUNS = _set(
    "budget cap capped limit limited limite límite teto tope ceiling threshold orçamento "
    "orcamento presupuesto maximum minimum max min máximo mínimo maximo minimo deadline prazo "
    "plazo entrega due capacity capacidade capacidad lotação lotacao aforo"
)
_LIMIT_LINKS = _Phrases.of("limits", "deadlines", leaving=_LIMIT_NOUNS)
# Any word a limit can begin with: a sentence without one has no limit (`_LIMITED`).
_LIMIT_ANY = _Phrases.of("limits", "deadlines")
# Words of one language's cue groups that are everyday words of another, with whether they
# are a Romance language's ("so": Portuguese "só", only, and English "so"; "show": Brazilian
# slang for "great" and English "show"; "todo": an English note, and "all" in Portuguese and
# Spanish; "eu": Portuguese "I", and the EU): a cue only in a sentence of that language
# (`_cues`, `_romance`).
_LOOK_ALIKES = {
    ("musts", "so"): True,
    ("thanks", "show"): True,
    ("standing", "todo"): True,
    ("notes", "todo"): False,
    ("first_person", "eu"): True,
}


def _unlike(group: str) -> frozenset[str]:
    """The look-alikes of `group`, as written and without accents (`_LOOK_ALIKES`)."""
    alike = {w for g, w in _LOOK_ALIKES if g == group}
    return frozenset(p for p in _phrases(group) if _strip_accents(p) in alike)


# Cue groups whose presence anywhere in a sentence is a feature (`features`).
_CUES = {
    group: _Phrases.of(group, leaving=_unlike(group))
    for group in sorted(
        _set(
            "bans musts asks lifts changed likes goals reported narrative opinion status thanks "
            "standing norms you disavowed reminded habitual unsure"
        )
    )
}
# Cue groups that count only as a sentence's opening.
_OPENINGS = {
    group: _Phrases.of(group, leaving=_unlike(group))
    for group in sorted(
        _set("requests notes conditional questions first_person negations opinion_opening")
    )
}
# The feature each opening group gives: its own, but an opinion's opening is an opinion.
_OPENED = {group: f"c:{group}" for group in _OPENINGS} | {"opinion_opening": "c:opinion"}
_MOVES = frozenset(_strip_accents(p) for p in _phrases("moves"))
# A reminder that opens a sentence, before what it restates ("As I said, never push to main.",
# "Como te dije: no toques producción."): read as the sentence after it.
_REMINDER = re.compile(
    rf"^(?:{_alternation(_phrases('reminded'))})(?:\s+(?:before|already|earlier|antes|ya|ja))?"
    r"\s*[,:;]\s*",
    re.IGNORECASE,
)
_TAG = re.compile(
    rf"(?:[,;]\s*|\s+)(?:{_alternation(_phrases('tags'))})\s*[?!.]*\s*$", re.IGNORECASE
)

# Content words (`content_words`): of three letters or more, or a number; and the words that
# say nothing of what a statement is about.
_WORD = re.compile(r"[^\W\d_]{3,}|\b\d+\b")
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
    una unos unas los las del les con sin sem esto eso ese esa esos esas aquí ahora más muy usted
    mucho mucha muchos muchas poco poca
    ustedes ellos ellas nosotros nuestro nuestra cual cuales cuando donde hacer hace puede
    debe también siempre nunca todavía entonces porque pero sino está están fue hay
"""
_STOP_WORDS = frozenset(_strip_accents(word) for word in _STOP_TEXT.split())

# Exact values: what a user cannot expect a summary to keep character for character.
_VALUE = re.compile(
    "|".join(
        (
            r"https?://\S+",
            r"\b[\w.+-]+@[\w-]+\.[\w.]+",
            r"(?:~|\.{1,2})?/[\w.@-]+(?:/[\w.@-]+)+",
            r"\b[\w-]+(?:/[\w.-]+)+",
            r"\b[\w-]+\.(?:py|js|ts|tsx|json|ya?ml|toml|md|txt|sh|go|rs|java|c|h|cpp|sql|csv|"
            r"ini|cfg|conf|env|lock|html|css|nvmrc)\b",
            r"\b[\w-]+\.(?:internal|intra|interno|lan|local|com|net|org|io|dev|br|mx|cl|ar|es|"
            r"pt)\b",
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
# Kept apart from `_VALUE`: a small bare number is a quantity for a limit, not an exact value.
_BARE_NUMBER = re.compile(r"^\d{1,2}(?:[.,]\d+)?$")
_NUMBERS = _alternation(_phrases("numbers"))
_WORDED_VALUE = re.compile(
    rf"(?<![\w-])(?:{_NUMBERS})(?:[\s-]+(?:and |e |y )?(?:{_NUMBERS}))*\s+"
    rf"(?:{_alternation(_phrases('units'))})(?![\w-])",
    re.IGNORECASE,
)
# A limit word, then up to three words, then a quantity (digits, number words or a date); a
# deadline word, then a date or a time ("by Friday", "before 10:00", not "by two spaces"); a
# quantity, then up to four words and "max" or a limit's noun ("400 lines max", "a 200
# dollar daily limit"); a limit's noun, then up to five words, then "is" and a quantity: a
# limit stated as a fact ("Humidity limit for dome opening is 85 percent.", "el presupuesto
# para vacunas este año es 8,000 soles").
_BETWEEN = r"(?:[\s,:]+[\w'’-]+){0,3}?[\s,:]+(?:the |a |an |o |os |as |el |la |los |las )?"
_WHEN = rf"(?:\d|(?:{_alternation(_phrases('dates'))})(?![\w-]))"
_QUANTITY = rf"(?:[$€£¥]\s?\d|(?:{_NUMBERS})(?![\w-])|{_WHEN})"
_LIMITED = re.compile(
    rf"(?<![\w-])(?:{_alternation(_phrases('limits'))})(?![\w-]){_BETWEEN}{_QUANTITY}"
    rf"|(?<![\w-])(?:{_alternation(_phrases('deadlines'))})(?![\w-]){_BETWEEN}{_WHEN}"
    rf"|(?:\d[\d.,]*\s*[kmb%]?|(?:{_NUMBERS})(?![\w-]))\s*(?:[\w'-]+\s+){{0,4}}"
    r"(?:max|maximum|tops|at most|no máximo|no maximo|como máximo|como maximo|como mucho|"
    r"a lo sumo|limit|cap|ceiling|limite|tope|teto|or fewer|or less|or under|ou menos|"
    r"o menos)\b"
    rf"|(?<![\w-])(?:{_alternation(sorted(_LIMIT_NOUNS | _set('maxima minima')))})(?![\w-])"
    rf"(?:[\s,]+[\w'’-]+){{0,5}}?(?:\s+(?:is|are|es|son|e|sao|será|sera)\s+|\s*[:=]\s*)"
    rf"(?:of |de |del |da |do )?{_QUANTITY}",
    re.IGNORECASE,
)
# Words addressed to AI systems in the third person: a page written to hijack one, not a user.
_AI = (
    r"(?:ai|a\.i\.|llms?|gpts?|chatbots?|language models?|ai models?|ai assistants?|"
    r"ai agents?|ias?|modelos? de (?:linguagem|lenguaje)|assistentes? de ia|asistentes? de ia|"
    r"agentes? de ia|copilots?|claude|chatgpt|gemini)"
)
_ANY_AI = (
    rf"(?:{_AI}|(?:automated |coding |code |automatic |automáticos? |automaticos? |de código )?"
    r"(?:assistants?|agents?|bots?|models?|assistentes?|asistentes?|agentes?)"
    r"(?: automáticos?| automaticos?| de código| de codigo)?)"
)
_READING = (
    r"(?:reading|processing|parsing|summari[sz]ing|crawling|scraping|indexing|that reads?|"
    r"who reads?|that see|which reads?|lendo|que lê|que leem|leyendo|que lee|que lean|"
    r"que leen)"
)
_TO_AI = re.compile(
    rf"^\W*(?:hidden |system |important |oculta |importante )?(?:note|message|attention|"
    r"instructions?|notice|nota|atenção|atencao|atención|atencion|instrução|instrucao|"
    r"instrucción|instruccion|aviso)?(?:\s+(?:oculta|importante|for|to|para))*[\s,:]*"
    rf"(?:all|any|every|dear|hey|the|todos os|todas as|todos los|todas las|os|as|los|las|"
    rf"cualquier|qualquer|querida|querido)?\s*{_ANY_AI}\b[^.!?]{{0,40}}?:"
    rf"|\b{_ANY_AI}\b[^.!?]{{0,30}}?\b{_READING}\b"
    rf"|\bif you(?:'re| are) an? {_ANY_AI}\b|\b(?:note|attention|instructions?|message|notice)"
    rf" (?:to|for) (?:all |any )?{_ANY_AI}\b|\bse (?:você )?(?:for|é) uma? {_ANY_AI}\b"
    rf"|\bsi eres una? {_ANY_AI}\b|^\W*(?:querida|querido|dear) {_ANY_AI}\b"
    rf"|^\W*(?:\w+ )?(?:note|notice|instructions?|message|nota|aviso)\s*:\s*(?:the |all |any )?"
    rf"{_ANY_AI}\b",
    re.IGNORECASE,
)
# Words without which nothing is addressed to an AI system (`_TO_AI` is not read then).
_AI_WORDS = _set(
    "ai i a llm llms gpt gpts chatbot chatbots bot bots model models modelo modelos assistant "
    "assistants assistente assistentes asistente asistentes agent agents agente agentes "
    "copilot copilots claude chatgpt gemini ia ias"
)


def _to_ai(sentence: str) -> bool:
    """Whether `sentence` addresses AI systems in the third person (`_TO_AI`)."""
    return not _AI_WORDS.isdisjoint(_padded(sentence).split()) and bool(_TO_AI.search(sentence))


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
            r"^\s*[rbuf]?(?:\"\"\"|''')|^\s*[rbu]?['\"].*['\"]\s*,?\s*(?:#.*)?$",
            r"[{}]\s*$|\)\s*;\s*$|^\s*[})\]]|\)\s*:\s*$|==|!=|=>|&&|\|\||\+=",
            r"^\s*\[?\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}|^\s*\[?\d{2}:\d{2}:\d{2}|"
            r"^\s*\w{3} +\d{1,2} \d{2}:\d{2}:\d{2}|\[\d{2}/\w{3}/\d{4}|"
            r"\[(?:INFO|DEBUG|WARN|WARNING|ERROR|CRITICAL|FATAL|TRACE)\]|"
            r"^\s*(?:INFO|DEBUG|WARN|WARNING|ERROR|FATAL|TRACE)\b[:\s-]|"
            # not a rule file's shout ("CRITICAL: Never reset the database")
            r"^\s*CRITICAL\b[:\s-](?!\s*(?i:never|always|only|do not|don't|must|avoid|ensure|"
            r"make sure|nunca|sempre|siempre|jamais|jamás|não|solo|só|somente|apenas)\b)",
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

# -- reading a sentence: features ------------------------------------------------------------

# Words whose -ed ending is a rule's, not a past tense; past forms that end otherwise.
_RULE_ED = _set(
    "required allowed prohibited locked reserved restricted limited needed protected banned "
    "approved permitted authorized generated"
)
_PAST = _set(
    "was were had did got went told said ran broke wrote left came found made took saw knew "
    "thought felt lost won sent spent forgot understood tinha tenia habia estava estaba usava "
    "usaba era fue foi tuvimos tivemos reprovei reprobe escribi entendi escrevi corrio rodou "
    "rompio ia iba"
)
# After an -ed word that describes a noun; subjects before one that is a past action.
_PARTICIPLE_NEXT = _set("at by with in into as under per")
_SUBJECTS = _set("i we you he she they it who that which someone somebody everyone nobody")
# Past-tense endings (accents stripped): Portuguese -ou/-eu/-iu, Spanish -aron/-ieron and the
# imperfect's first person plural.
_PAST_ENDINGS = ("ou", "eu", "iu", "aron", "ieron", "abamos", "iamos")
_NEVER_PAST = re.compile(
    r"\b(?:never|nunca|jamais|jamas)\s+(?:\w+ed|had|got|went|ran|did|was|were|came|told|said|"
    r"tuvimos|tuve|tivemos|tive|habia|tinha|iba|ia|fui|fue|foi|entendi|recebeu|respondeu|"
    r"respondio|corrio|rodou|usabamos|usavamos|llego|chegou)\b"
)
_ONLY_NUMBER = re.compile(
    r"\b(?:only|solo|so|somente|apenas)\s+(?:the\s+)?(?:\d+|one|two|three|four|five|dos|tres|"
    r"duas|dois)\b(?!\s*(?:max|at most))"
)
# A line's label ("rule 3:", "regra:", "note:", "todo:"): read as a feature, the rest as the
# sentence, so that "Rule 3: never touch X" opens as "never touch X" does (a time's colon,
# "3:30pm", is no label's).
_LABEL = re.compile(r"^([a-z][a-z0-9 /#-]{1,30}):(?!\d)\s*")
# A modal of obligation or prohibition: a rule whoever it is said of ("Tests must pass").
_MODAL = re.compile(
    r"\b(?:must|mustn't|has to|have to|needs to|shall|required|requires|mandatory|compulsory|"
    r"is to be|are to be|not allowed|forbidden|prohibited|deve|devem|tem que|tem de|precisa|"
    r"obrigatorio|obrigatoria|proibido|proibida|debe|deben|tiene que|tienen que|hay que|"
    r"obligatorio|obligatoria|prohibido|prohibida)\b"
)
# A deadline's own words: a date after them is a limit, not a fact.
_DUE = re.compile(r"\b(?:due|deadline|no later than|prazo|plazo|entrega|entregar|se entrega)\b")
# A date or a time of day, in words or digits ("on Monday", "a las 9", "às 15h").
_WHEN_WORDS = re.compile(
    rf"(?<![\w-])(?:{_alternation(_strip_accents(p) for p in _phrases('dates'))})(?![\w-])"
    r"|\b(?:at|a las|as|às|a la|ao|al) \d{1,2}(?::\d{2}|h\d{0,2})?\b|\b\d{1,2}h\d{0,2}\b"
)
# "is", "are" and their kin: what a fact is stated with (not "here is", which shows what
# follows: "Here is the config:").
_COPULA = re.compile(
    r"(?<!here )(?<!aqui )(?<!aca )"
    r"\b(?:is|are|es|e|esta|son|sao|fica|queda|se llama|se chama|called|named|runs|uses|"
    r"usa|usamos|corre|roda)\b"
)
# "I always forget ...", "Siempre confundo ...", "Costumo conferir ...", "I usually ...": a
# habit, told.
_HABIT = re.compile(
    r"^(?:i|we|eu|a gente|nos|yo|nosotros)\b.{0,20}\b(?:always|never|sempre|nunca|siempre)\b"
    r"|^(?:eu |nos |yo |nosotros )?(?:costumo|costumamos|suelo|solemos)\b"
    r"|^(?:i|we) (?:usually|normally|typically|tend to (?!prefer|like|favou?r))\b"
)
_TOKEN = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_CAPS = re.compile(r"\b[A-ZÁÉÍÓÚÂÊÔÃÕÇÑ]{3,}\b")
_NAME = re.compile(r"(?<=\w )[A-Z][a-z]{2,}")
_LIST_MARK = re.compile(r"^\s*(?:[-*•+]|\d+[.)])\s+")
# A directive (an imperative, a modal, ...) read with the scene it is in (`features`): a
# status word, a past tense, a value, a conditional, ...
_DIRECTIVES = ("imperative", "infinitive", "negations", "modal", "standing")
_SCENES = _set(
    "status past narrative copula first_person digit value name conditional when caps bullet "
    "questions requests unsure"
)
# Number words, one word each ("twelve", "cinco"): a quantity in words.
_NUMBER_WORDS = frozenset(_strip_accents(p) for p in _phrases("numbers") if " " not in p)
# A bound stated after its quantity ("twenty hours, no more", "ni uno más", "five tops").
_NO_MORE = re.compile(
    r"\b(?:no more|not more|nothing more|not a single one more|not one more|ni uno mas|"
    r"ni una mas|nenhuma a mais|nenhum a mais|nem um a mais|nem uma a mais|no se pasa|"
    r"sin prorroga|sem prorrogacao|nothing outside|fuera de ese|not over|tops|max)\b"
)
# A span of hours or numbers ("3:30pm to 6pm", "06:00-07:00", "entre 22h e 2h").
_RANGE = re.compile(
    r"\b\d{1,2}(?::\d{2})?\s*(?:am|pm|h)?\s*(?:-|to|a|ate|until|till|e|y)\s*"
    r"\d{1,2}(?::\d{2})?\s*(?:am|pm|h)?\b"
)
# A passive, present or future: how a rule is stated as a fact ("secrets are never copied",
# "está proibido ...").
_PASSIVE = re.compile(
    r"\b(?:is|are|be|been|being|get|gets|es|son|sao|e|sera|seran|esta|estan|estao|fica|"
    r"ficam|queda|quedan)\s+(?:never\s+|always\s+|"
    r"only\s+|not\s+|nunca\s+|siempre\s+|sempre\s+|solo\s+|so\s+)?"
    r"\w+(?:ed|en|ado|ada|ados|adas|ido|ida|idos|idas)\b"
)
# Where a norm holds ("here", "in this codebase", "acá", "nesta equipa", "full stop"; not
# "here is the config").
_NORM = re.compile(
    r"\b(?:(?:here|aqui|aca)(?! is| are|'s| esta| estao| tienes| tens| va| vai| van| vao)|"
    r"around here|in this (?:team|codebase|repo|repository|project|company|house|"
    r"assignment|course|class|office|shop|firm)|on this (?:team|project|repo)|at (?:our|this) "
    r"(?:company|firm|shop|office|brokerage|clinic|school)|in our (?:team|company|repo|"
    r"codebase|shop|office)|full stop|period|no exceptions|ca na|nesta|neste|nesse|"
    r"nessa|en esta|en este|en nuestra|en nuestro|na nossa|no nosso|por aqui|por aca)\b"
)
# Someone else's words, reported ("QA keeps telling everyone that ...", "sostiene que").
_SAYS = re.compile(
    r"\b(?:swears?|keeps? telling|keeps? saying|insists?|claims?|argues?|believes?|sostiene|"
    r"asegura|garante|garantiu|costuma dizer|suele decir|jura|afirma|acha que|cree que|"
    r"piensa que|thinks|says|said)\b"
)
# "No Safari, ...", "Na Unitel ...": Portuguese "in the" before a name, not a "no".
_PLACE = re.compile(r"^[Nn](?:o|a|os|as)\s+[A-Z]")
# Someone described, not told: an adverb, then a verb in the third person ("Oskar always
# rewrites ...", "the tokenizer never terminates ...", "the prompt no longer fits ...").
_DESCRIBES = re.compile(
    r"\b(?:always|never|only|ever|usually|often|rarely|sometimes|still|no longer)\s+"
    r"[a-z]{2,}[^s\W]s\b"
)
# The Portuguese and Spanish imperfect ("sempre marcava", "nunca usaba"): a habit of the past.
_IMPERFECT = re.compile(r"\b\w{2,}(?:ava|avam|avamos|aba|aban|abamos)\b")
# A conditional's opening, and a consequence that predicts (`_conditional`).
_IF = re.compile(
    r"^(?:if|when|whenever|unless|should|se|si|quando|cuando|caso|en caso de|every time|"
    r"each time|cada vez que|toda vez que|sempre que|siempre que)\b"
)
_WILL = re.compile(
    r"\b(?:will|would|could|might|'ll|won't|going to|vai|vamos|iria|seria|tendre|tendria|"
    r"tendra|sera|habria|da pra|da para|"
    r"vas a|va a)\b|\b\w+(?:ria|rian|remos)\b"
)
# A rule's hold on a passing situation ("... while the brake is being replaced", "até o preço
# baixar", "hasta que paguen"): news that the situation ended lifts it (`holds_while`).
_PASSING = re.compile(
    r"\b(?:while|whilst|until|till|pending|for now|for the time being|as long as|enquanto|"
    r"ate que|ate (?:o|a|os|as)|por enquanto|por ora|por agora|mientras|hasta que|"
    r"hasta (?:el|la|los|las)|por ahora|por el momento|por lo pronto|de momento)\b"
    # a date or a time passes; news of it is no situation's ("until Friday", "até o dia 5")
    rf"(?!\s+(?:the |o |a |el |la )?(?:dia |day |next )?{_WHEN})"
)
# "No longer" read as one word: its "no" bans nothing (`features`).
_NO_LONGER = re.compile(r"\bno longer\b")
# A clause's first word, after a comma, a semicolon or a colon (`_around`).
_CLAUSE = re.compile(r"[,;:]\s*([a-z']+)")
# The word after an adverb of frequency or restriction (`_around`).
_ADVERB = re.compile(
    r"\b(?:always|never|only|siempre|nunca|jamas|sempre|solo|so|somente|apenas|solamente|"
    r"unicamente)\s+([a-z']+)"
)
# The contexts a rule word is read in (`features`: a rule word and its context, together).
_CONTEXTS = tuple(
    sorted(
        _set(
            "narrative opinion reported first_person habit you question_end status past "
            "imperative infinitive negations conditional requests disavowed reminded habitual "
            "unsure"
        )
    )
)
_RULE_CUES = ("bans", "musts", "asks", "limited", "lifts")


def normalised(sentence: str) -> str:
    """`sentence` as the features read it: lower case, without accents, list marks, emphasis
    and code marks, spaces collapsed."""
    text = sentence.replace("’", "'").replace("`", "").replace("*", "").replace("_", " ")
    text = _LIST_MARK.sub("", _strip_accents(text).lower())
    return " ".join(text.replace("¿", " ").replace("¡", " ").split())


def features(sentence: str) -> frozenset[str]:
    """What the model reads of a sentence: the vocabulary's groups it holds ("c:bans"), its
    shape (a question, a list item, an imperative, a past tense, a value, a limit), each rule
    group together with its context ("x:bans&narrative") and each directive with its scene
    ("y:imperative&status"), its first words and those of its clauses, the word after an
    "always" or a "never", its words and their four-letter pieces."""
    whole = normalised(sentence)
    label = _LABEL.match(whole)
    plain = whole[label.end() :] if label is not None and label.end() < len(whole) else whole
    # "Porfa, no ...", "..., ¿me entendés?", "As I said, no ..."
    text = _TAG.sub("", _POLITE.sub("", _REMINDER.sub("", plain)))
    tokens = _TOKEN.findall(_NO_LONGER.sub("nolonger", text))  # no "no" of a ban
    padded = _padded(text)
    words = frozenset(padded.split())
    romance = _romance(words)
    found = _cues(padded, words, "c:", romance)
    found |= _opened((padded, _padded(whole)), romance)  # a label may open it ("Note: ...")
    found |= _shape(sentence, text, tokens, _limited(whole))
    if _CUES["unsure"].opens(padded):  # an indirect question: "no sé si ...", "not sure if ..."
        found.add("c:question_end")
    context = [c for c in _CONTEXTS if f"c:{c}" in found]
    for cue in _RULE_CUES:
        if f"c:{cue}" in found:
            found |= {f"x:{cue}&{c}" for c in context}
    for directive in _DIRECTIVES:
        if f"c:{directive}" in found:
            found |= {f"y:{directive}&{c}" for c in _SCENES if f"c:{c}" in found}
    found |= _head(text)
    cues = sorted(f for f in found if f.startswith(("c:", "h:")))
    found |= {f"z:{a}&{b}" for i, a in enumerate(cues) for b in cues[i + 1 :]}
    first = tokens[0] if tokens else ""
    found |= {f"first={first}", f"first2={' '.join(tokens[:2])}"}
    found |= _around(text)
    found |= {f"w={t}" for t in tokens}
    found |= {f"b={a}_{b}" for a, b in pairwise(tokens)}
    found |= {f"s={t[-3:]}" for t in tokens if len(t) >= 5}
    found |= {f"sfx={t[-2:]}" for t in tokens[:4] if len(t) >= 5}
    found |= {f"g={gram}" for token in tokens if len(token) > 2 for gram in _grams(f" {token} ")}
    found.add(f"len={min(len(tokens) // 5, 6)}")
    if label is not None:
        found.add(f"label={re.sub(r'[0-9]+', '#', label.group(1).strip())}")
    return frozenset(found)


def _cues(padded: str, words: frozenset[str], mark: str, romance: bool) -> set[str]:
    """The cue groups (`_CUES`) a sentence (`_padded`, its `words`) holds anywhere, each as
    `mark` and its name; a look-alike only in its own language (`_LOOK_ALIKES`; `romance`:
    the sentence is Portuguese or Spanish, `_romance`)."""
    found = {f"{mark}{group}" for group, cue in _CUES.items() if cue.within(padded, words)}
    return found | {
        f"{mark}{group}"
        for (group, word), own in _LOOK_ALIKES.items()
        if group in _CUES and own == romance and word in words
    }


def _opened(openings: tuple[str, ...], romance: bool) -> set[str]:
    """The features of the opening groups (`_OPENINGS`) any of `openings` (`_padded`) begins
    with; a look-alike only in its own language, as in `_cues`."""
    found = {_OPENED[g] for g, cue in _OPENINGS.items() for o in openings if cue.opens(o)}
    return found | {
        _OPENED[g]
        for (g, word), own in _LOOK_ALIKES.items()
        if g in _OPENINGS and own == romance and any(o.startswith(f" {word} ") for o in openings)
    }


def _romance(words: frozenset[str]) -> bool:
    """Whether a sentence's words (`_padded`) are Portuguese or Spanish: one of their
    function words or everyday words no English sentence has is there."""
    return not _ROMANCE_MARKS.isdisjoint(words)


def _head(text: str) -> set[str]:
    """The cue groups and limits of a sentence's first clause, when a later one follows
    ("h:limited"): what it says before the reason or the story after it ("Lines no wider
    than 72 columns, my printer cuts the rest off.")."""
    end = _HEAD_END.search(text)
    if end is None or end.start() < _HEAD_MIN:
        return set()
    head = text[: end.start()]
    padded = _padded(head)
    words = frozenset(padded.split())
    found = _cues(padded, words, "h:", _romance(words))
    if _LIMIT_ANY.within(padded, words) and _LIMITED.search(head) is not None:
        found.add("h:limited")
    if _MODAL.search(head) is not None:
        found.add("h:modal")
    return found


# Where a sentence's first clause ends, and the fewest chars it has (`_head`).
_HEAD_END = re.compile(
    r"[,;:()]|\s[-–—]\s|\b(?:because|since|cause|cos|porque|pois|pq|ya que|ja que|so that)\b"
)
_HEAD_MIN = 8


def _around(text: str) -> set[str]:
    """The words a clause opens with ("If the tests fail, don't merge": "clause=don't") and
    the word after an adverb of frequency or restriction ("always rewrites", "nunca uses":
    whether someone is told or described), with its ending."""
    found = set[str]()
    for match in _CLAUSE.finditer(text):
        found.add(f"clause={match.group(1)}")
        if match.group(1) in _STARTS:
            found.add("c:clause_imperative")
    for match in _ADVERB.finditer(text):
        found.add(f"adv_next={match.group(1)}")
        if len(match.group(1)) >= 4:
            found.add(f"adv_sfx={match.group(1)[-2:]}")
    return found


def _grams(word: str) -> Iterator[str]:
    """The four-letter pieces of a word padded with spaces: what is read of a word the model
    has not seen, from its parts (an inflection, a typo, a missing accent)."""
    return (word[i : i + _GRAM] for i in range(len(word) - _GRAM + 1))


_GRAM = 4


def _limited(whole: str) -> bool:
    """Whether a sentence (`normalised`) states a limit (`_LIMITED`), a label's words too
    ("Aforo máximo del bloque: 45 personas"); one without a word a limit begins with has
    none, and `_LIMITED` need not be read."""
    if _BOUND.search(whole):
        return True
    padded = _padded(whole)
    return _LIMIT_ANY.within(padded, frozenset(padded.split())) and bool(_LIMITED.search(whole))


# A bound written as a comparison of a named thing with a quantity ("Coverage: >80%",
# "bundle <= 250 KB"), not one between two quantities ("5 > 3"), names ("x > y") or an
# arrow ("a -> 3").
_BOUND = re.compile(r"(?:[^\W\d_]|[:)%])\s*(?:<=|>=|[<>≤≥])\s*\d")


def _shape(sentence: str, text: str, tokens: list[str], limited: bool) -> set[str]:
    """The features of a sentence's form (see `features`; `limited`: it states a limit,
    `_limited`)."""
    shape = {
        "c:qmark": "?" in text,
        "c:question_end": text.endswith("?"),
        "c:imperative": _imperative(tokens),
        "c:infinitive": bool(tokens) and _infinitive(tokens[0], tokens),
        "c:limited": limited,
        "c:value": bool(value_spans(sentence)),
        "c:when": _WHEN_WORDS.search(text) is not None,
        "c:copula": _COPULA.search(text) is not None,
        "c:name": _NAME.search(sentence) is not None,
        "c:caps": _CAPS.search(sentence) is not None,
        "c:modal": _MODAL.search(text) is not None,
        "c:due": _DUE.search(text) is not None,
        "c:digit": any(c.isdigit() for c in text),
        "c:bullet": _LIST_MARK.match(sentence) is not None,
        "c:past": _past(tokens),
        "c:never_past": _NEVER_PAST.search(text) is not None,
        "c:only_number": _ONLY_NUMBER.search(text) is not None,
        "c:habit": _HABIT.match(text) is not None,
        "c:i_not": re.match(r"^(?:i|we|eu|yo|a gente|nos)\s+(?:don't|do not|dont|nao|no)\b", text)
        is not None,
        "c:numword": not _NUMBER_WORDS.isdisjoint(tokens),
        "c:no_more": _NO_MORE.search(text) is not None,
        "c:range": _RANGE.search(text) is not None,
        "c:passive": _PASSIVE.search(text) is not None,
        "c:norm": _NORM.search(text) is not None,
        "c:says": _SAYS.search(text) is not None,
        "c:place": _PLACE.match(sentence.strip().lstrip("-*• ")) is not None,
        "c:describes": _DESCRIBES.search(text) is not None,
        "c:imperfect": _IMPERFECT.search(text) is not None,
        **_conditional(text),
    }
    return {name for name, present in shape.items() if present}


def _imperative(tokens: list[str]) -> bool:
    """Whether a sentence opens with an imperative, after an adverb or not ("Sempre fixe
    ...", "Nunca uses ...", "Solo usa ...")."""
    if tokens and tokens[0] in _STARTS:
        return True
    return len(tokens) > 1 and tokens[0] in _ADVERBS and tokens[1] in _STARTS


_ADVERBS = _set(
    "sempre siempre nunca jamais jamas so solo somente apenas solamente just only strictly "
    "absolutely always also"
)


def _conditional(text: str) -> dict[str, bool]:
    """Whether a conditional's consequence is a prediction ("If they sue, legal would have
    to ...": a hypothetical) or a directive ("If the tests fail, don't merge": a rule)."""
    if _IF.match(text) is None:
        return {}
    comma = text.find(",")
    then = text[comma + 1 :] if comma >= 0 else text
    first = then.split(maxsplit=1)[0] if then.strip() else ""
    return {
        "c:if_then_will": _WILL.search(then) is not None,
        "c:if_then_do": first in _STARTS or first in ("don't", "dont", "never", "no", "nao"),
    }


def _infinitive(word: str, tokens: list[str]) -> bool:
    """A Portuguese or Spanish infinitive opening a rule ("Rodar os testes", "Validar después
    de cada cambio"): not an English word that ends alike ("Server 3 ...")."""
    if len(word) < 4 or not word.endswith(("ar", "er", "ir")) or word in _NOT_INFINITIVES:
        return False
    return any(token in _ROMANCE for token in tokens[1:])


_NOT_INFINITIVES = _set("por mar bar car par lugar hogar ayer mujer poder ser estar")
# Function words of Portuguese and Spanish, none of them English ("do", "as", "no" are).
_ROMANCE = _set(
    "de da dos das del el la los las o os em en na nos nas com con para por um uma "
    "un una que sem sin ao al pelo pela se"
)


# What tells a Portuguese or Spanish sentence from an English one (`_romance`).
_ROMANCE_MARKS = _ROMANCE | _set(
    "nao pode podem usar voce vc isso esse essa este esta muito tambem tambien pra hay es "
    "mais pero porque todos todas sempre siempre nunca"
)


def _past(tokens: list[str]) -> bool:
    for at, token in enumerate(tokens):
        if token in _PAST:
            return True
        ed = len(token) >= 5 and token.endswith("ed") and token not in _RULE_ED
        if ed and not _participle(tokens, at):
            return True
        if len(token) >= 5 and token.endswith(_PAST_ENDINGS) and token not in ("voce",):
            return True
        if len(token) >= 6 and token.endswith(_YOU_DID) and token not in _NOT_YOU_DID:
            return True
    return False


# The endings of "you did" in Spanish and European Portuguese ("me cambiaste el nombre del
# bucket", "trocaste a ordem"), and the present tenses that end alike.
_YOU_DID = ("aste", "iste")
_NOT_YOU_DID = _set("existe insiste resiste consiste asiste subsiste persiste desiste contraste")


def _participle(tokens: list[str], at: int) -> bool:
    """Whether the -ed word at `at` describes the noun before it ("code wrapped at 80
    columns", "files stored in S3"), not a subject's past action ("we wrapped it")."""
    before = tokens[at - 1] if at else ""
    after = tokens[at + 1] if at + 1 < len(tokens) else ""
    return after in _PARTICIPLE_NEXT and before not in _SUBJECTS and not before.endswith("ly")


# -- the model ---------------------------------------------------------------------------------

# A sentence is a rule (or a constraint) when the model's belief in a rule, a constraint or a
# lift is at least this, or when the vocabulary states one plainly (`_plainly`): chosen on
# the tuning side's cross-validation (benchmarks/README.md), where 0.4 and 0.45 are the least
# short of the goal for carried rules (precision 90%, recall 95%), 0.45 by a little; models
# trained without tuning7 or heldout11 keep as many rules of those sets' dense sessions with
# either, and with 0.4 fewer rounds show a superseded value without its update.
_RULE_MASS = 0.4
# The belief a sentence with none of the vocabulary's cues (no rule word, limit, imperative,
# value, ...: only its words) needs to be a rule: the model's prior alone lifts chatter to
# 0.4 ("gg, heading off.", "Pull requests"). On the retired held-out sets 16 to 23 read by a
# model trained without them, the bare sentences it read as rules below it were 19 of 22
# not rules.
_BARE_RULE_MASS = 0.6
# The model's belief in `none` past which the vocabulary's plain reading (`_plainly`) of a rule
# or a preference is not taken: "Hold on, I need to double-check that number" has a directive
# and a word of need, and is chatter (chosen on the same cross-validation). An exact value or
# a date stated plainly stays a fact whatever the model says ("La reunión es el lunes a las
# 9.": a value its change must be carried with, the reversal pairs of the tuning side).
_SURELY_NONE = 0.6
_MODEL_FILE = "instruction_model.json"
# The model's classes each kind `kind_of` gives stands for (`certainty`).
_CLASSES_OF = {
    "rule": ("rule", "constraint", "lift"),
    "constraint": ("rule", "constraint", "lift"),
    "fact": ("fact", "goal"),
    "preference": ("preference",),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class _Model:
    """A linear model over `features`: a score per class is its bias plus the weights of the
    features present; the class beliefs are their softmax."""

    classes: tuple[str, ...]
    bias: tuple[float, ...]
    weights: dict[str, tuple[float, ...]]

    def beliefs(self, found: frozenset[str]) -> dict[str, float]:
        scores = list(self.bias)
        for feature in found:
            for index, weight in enumerate(self.weights.get(feature, ())):
                scores[index] += weight
        top = max(scores)
        exps = [math.exp(s - top) for s in scores]
        total = sum(exps)
        return {c: e / total for c, e in zip(self.classes, exps, strict=True)}


@cache
def _model() -> _Model:
    """The model shipped with the package (`scripts/train_instruction_model.py` writes it)."""
    data = json.loads(resources.files(__package__).joinpath(_MODEL_FILE).read_text("utf-8"))
    return _Model(
        classes=tuple(data["classes"]),
        bias=tuple(data["bias"]),
        weights={f: tuple(w) for f, w in data["weights"].items()},
    )


def kind_of(sentence: str) -> str | None:
    """What a user's sentence is worth carrying as: "rule", "constraint", "fact",
    "preference", or None (see the module docstring; a goal is a fact, a lift a rule)."""
    found = _read(sentence)
    return None if found is None else kind_for(found, _model().beliefs(found))


def certainty(sentence: str) -> float:
    """How surely a user's sentence is what `kind_of` reads it as, from 0 to 1: the model's
    belief in the classes of that kind (a rule, a constraint or a lift for a rule or a
    constraint; a fact or a goal for a fact; a preference); 0 for one it does not carry. What
    a tight block keeps first (`chatcli.history.carry`)."""
    found = _read(sentence)
    if found is None:
        return 0.0
    beliefs = _model().beliefs(found)
    kind = kind_for(found, beliefs)
    return sum(beliefs[c] for c in _CLASSES_OF.get(kind or "", ()))


def directs(sentence: str) -> bool:
    """Whether the vocabulary plainly reads a sentence as telling the assistant what to do
    (a rule, a limit or an imperative: `_plainly`), whatever the model believes of it:
    "Switch to American spelling, the client is in Texas." directs, news does not."""
    found = _read(sentence)
    return found is not None and _plainly(found) in ("rule", "constraint", "preference")


def lift_belief(sentence: str) -> float:
    """The model's belief, from 0 to 1, that a sentence lifts or changes an earlier rule or
    value (the class it learns from the later statements of the tuning side's reversal
    pairs); 0 for one `kind_of` does not read. "Cada associado pode trazer quatro amigos
    agora." is believed a change; "Escreva um texto para o site sobre o novo parque canino.",
    which has a word of change too, is not."""
    found = _read(sentence)
    return 0.0 if found is None else _model().beliefs(found)["lift"]


def holds_while(sentence: str) -> bool:
    """Whether a sentence holds only while a passing situation lasts ("Keep everyone off the
    top platform while the brake is being replaced."): news that the situation ended, in its
    own words and none of the rule's ("Engineer certified the replacement on Line 4 an hour
    ago."), lifts it (`chatcli.history.statements`)."""
    return _PASSING.search(normalised(sentence)) is not None


def reads_as_lift(sentence: str) -> bool:
    """Whether `kind_of` reads a sentence as a rule mostly because the model believes it lifts
    or changes an earlier rule or value (its belief in a lift is more than in a rule and a
    constraint together), in words no vocabulary lists: "north pit's patched up, fill it",
    "Morning sync moved to ten o'clock." (the model learns lifts from the later statements
    of the tuning side's reversal pairs). The resolver reads it as saying a change
    (`chatcli.history.statements`)."""
    found = _read(sentence)
    if found is None:
        return False
    beliefs = _model().beliefs(found)
    return (
        kind_for(found, beliefs) == "rule"
        and beliefs["lift"] > beliefs["rule"] + beliefs["constraint"]
    )


def only_lifts(sentence: str) -> bool:
    """Whether a rule `kind_of` finds is one only as a lift: it says plainly that something
    no longer holds (`lifts`), and without the model's belief in a lift it would not be a
    rule ("Pushing to main is OK now."; a change that states the new value or rule, "the
    threshold is now $5,000", "switch to American spelling", is not). Such a
    sentence says something only of the rule it lifts ("Sooner or later the prompt no longer
    fits ..." lifts nothing): carrying takes it with an earlier item it may be on the point
    of, never alone (`chatcli.history.statements`)."""
    if cue_of(sentence) != "lift":
        return False
    found = _read(sentence)
    if found is None:
        return False
    beliefs = _model().beliefs(found)
    return beliefs["rule"] + beliefs["constraint"] < _RULE_MASS


def _read(sentence: str) -> frozenset[str] | None:
    """The features of a sentence `kind_of` weighs; None when it is not the user's to carry
    (cut off, pasted-looking, addressed to AI systems, a conversational move, a wondering, a
    heading, a verdict on the world)."""
    plain = sentence.strip()
    if not plain or plain.endswith(",") or looks_pasted(plain) or _to_ai(plain):
        return None  # (one that ends with a comma is cut off: it says nothing whole)
    if _moves_on(plain) or _wonders(plain) or _heads(plain):
        return None
    if _VERDICT.search(normalised(plain)):
        return None
    return features(_gone_on(plain))


def _heads(sentence: str) -> bool:
    """Whether a line is a heading: a few capitalised words ("Required Git Rules", "Valores
    No Negociables", "PERMISSÕES CONCEDIDAS") without a closing mark,
    a label's colon, a value, a word of a ban or an opening imperative ("Follow
    SOLID/KISS/DRY", "Respeitar AI_POLICY.md", "NEVER COMMIT WITHOUT ...": a rule file's
    terse rules)."""
    line = _LIST_MARK.sub("", sentence).strip()
    padded = _padded(line)
    if 1 <= len(padded.split()) <= 3 and set(padded.split()) <= _BANNER and "." not in line:
        return True  # "🚫 PROHIBIDO", "🚫 NUNCA (NEVER)", "NUNCA FAÇA": a banner over rules
    if "." not in line and _BANNED_SORT.fullmatch(padded.strip()):
        return True  # "COMANDOS TERMINANTEMENTE PROIBIDOS", "Forbidden Actions": a list's title
    if not line or line[-1] in _CLOSING or ":" in line or value_spans(line):
        return False
    if _CUES["bans"].within(padded, frozenset(padded.split())):
        return False
    words = _HEADING_WORD.findall(line)
    if not 2 <= len(words) <= _HEADING_MOST:
        return False
    if not all(w[0].isupper() or w.lower() in _HEADING_SMALL for w in words):
        return False
    tokens = _TOKEN.findall(normalised(line))
    return not (_imperative(tokens) or (bool(tokens) and _infinitive(tokens[0], tokens)))


_CLOSING = frozenset(".!?;,)")
# The words of a banner over a list of rules (`_heads`).
_BANNER = _set(
    "never nunca jamais jamas prohibido proibido forbidden prohibited absolutamente absolutely "
    "do not don't dont faca hagas haga"
)
# A sort of thing said to be banned, as the title of a list of them (`_heads`).
_SORTS = (
    r"(?:commands?|actions?|operations?|practices?|patterns?|things?|tools?|libraries|"
    r"packages?|dependencies|comandos?|acoes|acciones|operacoes|operaciones|praticas|"
    r"practicas|padroes|patrones|coisas|cosas|ferramentas|herramientas|bibliotecas|librerias|"
    r"pacotes|paquetes|dependencias)"
)
_BANS = r"(?:forbidden|prohibited|banned|proibid[oa]s?|prohibid[oa]s?|vedad[oa]s?)"
_BANNED_SORT = re.compile(rf"(?:{_SORTS}(?: [a-z]+)? {_BANS}|{_BANS} {_SORTS}(?: [a-z]+)?)")
_HEADING_WORD = re.compile(r"[^\s/()&+-]+")
_HEADING_MOST = 7
# The words a title leaves in lower case (`_heads`).
_HEADING_SMALL = _set(
    "a an the of to and or for in on with at by de da do das dos del la el los las e y o "
    "para por com con sin sem em en no na al"
)
# A verdict on how the world should be, not a rule for the assistant ("Notebooks in
# production should be illegal.", "Neonic sprays ought to be banned within a mile of any
# hive.", "essas bandas deviam ser proibidas nas festas"), read `normalised`.
_VERDICT = re.compile(
    r"\b(?:should|ought to) (?:really )?be (?:made )?(?:illegal|outlawed|fined|punished|"
    r"jailed|prosecuted|criminali[sz]ed)\b|\b(?:ought to|oughta) be banned\b"
    r"|\bshould be made to\b"
    r"|\b(?:devia|deviam|deveria|deveriam) (?:ser|estar) (?:proibid|ilegal|multad|pres[oa])"
    r"|\b(?:deberia|deberian|tendria|tendrian) (?:que )?(?:estar|ser) "
    r"(?:prohibid|ilegal|multad|pres[oa])"
)


def _wonders(sentence: str) -> bool:
    """Whether a sentence opens by wondering, after its subject or not, and goes on to
    nothing else: a question without its mark ("No sé si el seguro cubre las piezas", "I'm
    unsure whether gold tooling needs to be listed", "Fico em dúvida se vale incluir o
    gráfico"), whose "no" and "needs" say no rule; "Not sure it matters, but never ..." goes
    on to a rule (`_gone_on`)."""
    words = _padded(normalised(sentence)).split()
    return _BUT.isdisjoint(words) and _opens_wondering(words)


def _opens_wondering(words: list[str]) -> bool:
    while words and words[0] in _WONDERER:  # bounded: one word less each pass
        words = words[1:]
    return _CUES["unsure"].opens(" " + " ".join(words) + " ")


def _gone_on(sentence: str) -> str:
    """What a sentence that opens by wondering goes on to after its "but" ("Not sure it
    matters, but never push to main.": "never push to main."), read alone: the wondering
    doubts nothing of it. Any other sentence as it is."""
    match = _BUT_WORD.search(sentence)
    if match is None:
        return sentence
    text = normalised(sentence)
    if not (_HEDGE.match(text) or _opens_wondering(_padded(text).split())):
        return sentence
    return sentence[match.end() :].strip() or sentence


_BUT_WORD = re.compile(r"\b(?:but|mas|pero)\b", re.IGNORECASE)
# An opening that doubts whether what follows matters ("Not sure it matters, but ...").
_HEDGE = re.compile(
    r"(?:i'?m |i am )?(?:not sure|unsure|no idea|dunno|i don'?t know|no se|nao sei|"
    r"no estoy segur[oa]|nao tenho (?:a )?certeza)\b"
)


_BUT = _set("but mas pero")
# The words before a wondering's opening (`_wonders`): its subject, a softener.
_WONDERER = _set(
    "i i'm im am we we're are still honestly really just eu fico estou ando ainda "
    "sinceramente yo ando estoy sigo todavia la verdad"
)


def _moves_on(sentence: str) -> bool:
    """Whether a sentence only moves the turn on, in one move or a few ("Go on.", "Ok, next
    one.", "Dale, sigue.")."""
    parts = (" ".join(_TOKEN.findall(p)) for p in _MOVE_MARKS.split(normalised(sentence)))
    return all(part in _MOVES for part in parts if part)


_MOVE_MARKS = re.compile(r"[,.;!?]+")


def kind_for(
    found: frozenset[str], beliefs: dict[str, float], *, rule_mass: float = _RULE_MASS
) -> str | None:
    """The kind of a sentence with the features `found`, given the model's `beliefs` in each
    class (what `kind_of` decides; `scripts/train_instruction_model.py` cross-validates it,
    at other values of `rule_mass` too): a rule or a constraint when the belief in a rule, a
    constraint or a lift is at least `rule_mass` (`_BARE_RULE_MASS` for a sentence with no
    cue of the vocabulary)."""
    if any(_GOAL_LABEL.match(f, 6) for f in found if f.startswith("label=")):
        return "fact"  # "Goal: ...", "End state: ...", "Objetivo: ...": a goal, said so
    cued = any(f.startswith("c:") for f in found)
    needed = rule_mass if cued else max(rule_mass, _BARE_RULE_MASS)
    if beliefs["rule"] + beliefs["constraint"] + beliefs["lift"] >= needed:
        return "constraint" if beliefs["constraint"] > beliefs["rule"] + beliefs["lift"] else "rule"
    best = max(("fact", "preference", "goal", "none"), key=beliefs.__getitem__)
    if best in ("none", "fact"):
        plainly = _plainly(found)
        if plainly != "fact" and beliefs["none"] >= _SURELY_NONE:
            plainly = None
        return plainly or ("fact" if best == "fact" else None)
    return "fact" if best == "goal" else best


# A label that says a goal follows (`kind_for`), read on the `label=` feature.
_GOAL_LABEL = re.compile(
    r"(?:goals?|end state|end goal|objective|objetivos?|meta|alvo|estado final|objetivo final|"
    r"meta final)(?: (?:for|of|do|da|de|del|para) [^:]*)?$"
)


def _plainly(found: frozenset[str]) -> str | None:
    """What the vocabulary states plainly, whatever the model says of words it has not seen
    (when it sees no rule: nothing, or a fact), when nothing of a question, a story, an
    opinion, a report or a note is there: a limit with a rule word or a directive (a
    constraint), a rule word with a directive or a modal of obligation (a rule), an
    imperative (at least a preference), an exact value (even in the first person), or a date
    or a goal word with "is" (a fact)."""
    blocked = found & _NOT_PLAINLY
    if blocked:  # an exact value said in the first person is still one ("We are moving OPS-12"),
        # and one said to have changed, in the past too ("Nos subieron el tope a 1.800 euros.")
        said = {"c:first_person", "c:past"} if "c:changed" in found else {"c:first_person"}
        return "fact" if blocked <= said and "c:value" in found else None
    rule = found & {"c:bans", "c:musts", "c:asks"}
    directive = found & {"c:imperative", "c:infinitive", "c:negations", "c:you", "c:bullet"}
    if "c:limited" in found and (rule or directive or "c:due" in found):
        return "constraint"
    if rule and (directive or "c:caps" in found or "c:modal" in found):
        return "rule"
    if found & {"c:imperative", "c:infinitive"}:
        return "preference"
    if "c:value" in found or ("c:copula" in found and found & {"c:when", "c:goals"}):
        return "fact"
    return None


# What keeps the vocabulary from stating anything plainly (`_plainly`).
_NOT_PLAINLY = _set(
    "c:question_end c:qmark c:reported c:narrative c:past c:never_past c:opinion c:habit "
    "c:i_not c:status c:thanks c:notes c:only_number c:first_person c:requests c:disavowed "
    "c:reminded c:unsure"
)


# -- the plainer readings ----------------------------------------------------------------------


def extract_instructions(text: str) -> tuple[str, ...]:
    """The user's explicit instructions in `text`: imperative sentences and rule sentences.

    A sentence is an instruction when it starts with an imperative (after an optional
    "please" / "por favor") or holds a rule or a limit word (`RULE_WORDS`), in English,
    Portuguese or Spanish. Questions are not instructions. Deterministic; order kept,
    duplicates dropped.
    """
    found: dict[str, None] = {}
    for sentence in sentences(text):
        if not sentence.endswith("?") and is_instruction(sentence):
            found.setdefault(sentence, None)
    return tuple(found)


def sentences(text: str) -> tuple[str, ...]:
    """The sentences of `text` (a line is at least one), list marks and blanks stripped; a
    title or an abbreviation (`_NO_END`) does not end one within a line."""
    stripped = (raw.strip().lstrip("-*•>").strip() for raw in _pieces(text))
    return tuple(sentence for sentence in stripped if sentence)


def _pieces(text: str) -> list[str]:
    """`text` split at sentence ends, a piece that ends at a title or an abbreviation joined
    to the next one on its line."""
    pieces: list[str] = []
    at, joinable = 0, False
    for end in [*_SENTENCE_END.finditer(text), None]:
        piece = text[at:] if end is None else text[at : end.start()]
        if joinable and _ends_short(pieces[-1]):
            pieces[-1] += f" {piece}"
        else:
            pieces.append(piece)
        if end is not None:
            at, joinable = end.end(), "\n" not in end.group()
    return pieces


def _ends_short(piece: str) -> bool:
    words = piece.split()
    last = words[-1].lower().lstrip("([\"'¿¡").rstrip(".") if words else ""
    return last in _NO_END and piece.endswith(".")


def is_instruction(sentence: str) -> bool:
    """Whether one sentence is an imperative or states a rule (see `extract_instructions`)."""
    plain = sentence.replace("’", "'").strip()
    if _to_ai(plain):
        return False
    opening = _POLITE.sub("", plain.lstrip("¡¿ "))
    if _NOT_RULES.match(opening):
        return False
    words = opening.lower().split(maxsplit=1)
    first = words[0].rstrip(":,") if words else ""
    negated = _NEGATIONS.match(opening) is not None
    return RULE_WORDS.search(plain) is not None or first in _STARTS or negated


def changes(sentence: str) -> bool:
    """Whether a sentence says that something changed or is lifted ("now", "again", "no
    longer", "instead", "forget", "feel free", ...)."""
    return cue_of(sentence) != ""


def lifts(sentence: str) -> bool:
    """Whether a sentence says plainly that a rule or a value no longer holds ("feel free",
    "forget what I said about", "is fine now", "you may ... again", "já pode", "ya puedes")."""
    return cue_of(sentence) == "lift"


# What holds a cue's words but says no change: a permission denied ("não pode passar de
# 5%", "no puedes", "no tienes permiso", "you may not"), or one that opens a sentence as its
# condition ("Si puedes, escribe ...", "If you can, ...", "Se puder, ..."; "Ya se puede ..."
# still lifts): a rule or a wish, not the lift of one; a phrase that reads as one without
# its accents ("paso a paso" is no "pasó a").
_NOT_A_CUE = re.compile(
    r" (?:nao|ninguem|nunca|jamais|no|nadie|tampoco) (?:se )?(?:pode|podem|podes|puede|puedes"
    r"|pueden|da pra|da para|tienes permiso|tenes permiso|tiene permiso|tienen permiso)(?= )"
    r"| (?:may|can|could|might) not(?= )"
    r"|^ (?:si|se|if) (?:tu |voce |usted |you )?(?:puedes|podes|puede|pueden|pode|podem|puder"
    r"|can)(?= )"
    r"| paso a paso(?= )"
)


# Dropping a restriction named in a few words ("drop that pickup-list restriction", "tira
# essa regra do horário", "quita el tope de gastos"): a lift.
_DROPPED = re.compile(
    r" (?:drop|lift|remove|scrap|ditch|waive|tira|tirar|retira|derruba|suspende|quita|quitá"
    r"|elimina|levanta|suspendé) (?:the|that|this|those|these|our|my|a|o|as|os|essa|esse|esta"
    r"|este|la|el|las|los|esa|ese)(?: \S+){0,3}? (?:restriction|restrictions|rule|rules|cap"
    r"|caps|limit|limits|ban|requirement|regra|regras|restricao|restricoes|limite|limites|teto"
    r"|proibicao|regla|reglas|restriccion|restricciones|tope|prohibicion)(?= )"
)


def cue_of(sentence: str) -> str:
    """How plainly a sentence says something changed: "lift" (`lifts`), "change" (a word of
    change: "now", "again", "instead", not in a sentence that only moves the turn on), or
    "" (a permission denied, "não pode", "you may not", is neither)."""
    padded = _NOT_A_CUE.sub(" ", _padded(sentence))
    words = frozenset(padded.split())
    if _LIFTS.within(padded, words) or _DROPPED.search(padded):
        return "lift"
    if _moves_on(sentence):  # "Ok, next one." says nothing changed
        return ""
    return "change" if _CHANGED.within(padded, words) else ""


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
    without its exact values, rule and limit words, words of change and function words. Two
    statements on the same point share most of them."""
    plain = sentence.replace("’", "'").strip()
    for start, end in reversed(value_spans(plain)):
        plain = plain[:start] + " " + plain[end:]
    padded = _padded(plain)
    for phrases in (_RULES, _LIFTS, _CHANGED, _LIMIT_LINKS):
        padded = phrases.removed(padded)
    return frozenset(_stem(word) for word in _WORD.findall(padded) if word not in _STOP_WORDS)


def _stem(word: str) -> str:
    """A crude stem, enough to tell two wordings of one point: an English inflection
    removed, then the first five letters ("deploys", "deploying" -> "deplo")."""
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            break
    return word[:5]
