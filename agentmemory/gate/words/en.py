"""English: the words the gate reads in a message and in an entry.

Data only: each name holds a compiled pattern, a word set or a tuple of
phrases with the same meaning in every language module (`words` names the
shape). A full language (English, German) has every name; the language-free
features are in `features`.
"""
from __future__ import annotations

import re


def _words(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


CODE = "en"
# Frequent words that tell the language of a short message (`language.detect`).
FUNCTION_WORDS = frozenset(
    "i i'm i've i'd i'll me my mine we our us you your he she it its they them their the a an and or but so "
    "of to in on at for with from by about into over after before is are was were be been am do does did don't "
    "doesn't didn't not no never have has had can can't could would should will won't this that these those "
    "what which who when where why how there here just now then than also too very please thanks yes ok "
    # Frequent words of a request or a preference said without a pronoun ("Keep code examples short, one
    # per answer."): a lone "per" or "con" must not make such a message Italian or Spanish.
    "per one each every all any some more less most only keep use using prefer like want need make always "
    "answer answers reply replies short long example examples".split()
)
# Phrases that label a secret's value ("my VPN password is ..."): read by `secrets`.
SECRET_LABELS = ("password", "passphrase", "passcode", "pin", "pin code", "code", "combination", "secret",
                 "token", "api key", "security answer", "security question", "login")
# Words that negate the term after them ("tabs, not spaces", "never unittest", "no Java").
NEGATION = ("not", "never", "no", "don't", "do not", "doesn't", "does not", "didn't", "won't", "can't", "cannot",
            "no longer", "without", "avoid", "avoids", "hate", "hates", "dislike", "dislikes", "nor")
# Words that keep a negated term apart from what is asserted ("tabs over spaces", "instead of unittest").
CONTRAST = ("over", "instead of", "rather than", "than", "not", "never", "no", "nor", "without", "avoid", "avoids",
            "avoiding", "no longer", "don't", "doesn't", "does not", "do not", "dislikes", "hates", "against")
# The command before what the person asks to remember ("remember that ...", "please note: ..."), left out of
# the entry offered in their words.
REMEMBER_LEAD = _words(
    r"^\W*(?:please\s+)?(?:(?:do\s+)?remember|memori[sz]e|note(?:\s+down)?|make a note|take a note|keep in mind|"
    r"(?:do not|don'?t) forget)\b(?!\s+to\b)(?:\s+(?:this|that|it))?(?:\s+about me)?\s*[:,-]?\s*(?:that\s+)?"
)


RECALL_QUESTION = _words(
    r"\b(?:do|did|can|could|would|will) you (?:still |even )?(?:remember|recall|know)\b(?!\s+(?:that|this)\b)"
    r"|\bwhat (?:do|did) you (?:remember|know|have)\b|\bremember (?:what|which|who|when|where|how|if|whether)\b"
)
REMEMBER = _words(
    r"\b(?:remember|memori[sz]e|note (?:that|this|down|it)|make a note|take a note|keep in mind|"
    r"(?:do not|don'?t) forget|save (?:this|that|it)|store (?:this|that|it)|(?:add|put|save|keep|write) "
    r"(?:this |that |it )?(?:in|into|to) (?:your |the )?memory|from now on|going forward|for future reference|"
    r"note for (?:the )?future|"
    r"in (?:the )?future,? (?:please )?(?:always|never|use|answer|reply|respond|write))"
)
FORGET = _words(
    r"\b(?:forget|unlearn|stop remembering|(?:do not|don'?t) remember)\b"
    r"|\b(?:remove|delete|erase|drop|clear)\b.{0,40}\b(?:memory|memories|notes?|facts?|entr(?:y|ies)|profile)\b"
)
STRONG_CORRECTION = _words(
    r"^\s*(?:correct(?:ion)?|update)\s*:|\b(?:actually|correction|no longer|not any ?more|i now|we now|"
    r"i'?ve (?:switched|moved|started|stopped|changed)|we'?ve (?:switched|moved|started|stopped|changed)|"
    r"(?:i|we) (?:switched|moved|changed|stopped using|started using)|that'?s (?:wrong|not right|outdated|out of date)"
    r"|(?:i|you) (?:was|were|got (?:it|that)) wrong|not true any ?more|isn'?t true)\b"
)
WEAK_CORRECTION = _words(r"\b(?:instead|rather than|these days|nowadays|now use|now prefer|wrong|outdated)\b")
INTERROGATIVE = _words(
    r"^\s*(?:what|which|who|whom|whose|when|where|why|how|do|does|did|is|are|am|was|were|can|could|would|"
    r"will|should|shall|have|has|any|anything)\b"
)
IMPERATIVE = _words(
    r"^\s*(?:please\s+|pls\s+|now\s+|ok,?\s+|okay,?\s+)?(?:write|fix|explain|show|help|give|tell|make|create|"
    r"generate|convert|refactor|debug|list|summari[sz]e|translate|implement|add|optimi[sz]e|review|check|find|"
    r"compare|describe|rewrite|draft|run|build|suggest|recommend|sort|parse|test|format|document|design|plan|"
    r"calculate|compute|count|name|define|outline|remind|walk me|let'?s|continue|go on|try|thanks|thank you|hi|hello|"
    r"hey|good (?:morning|evening|night)|bye|ok|okay|cool|great|nice|lol)\b"
)
FIRST_PERSON = _words(r"\b(?:i|i'?m|i'?ve|i'?d|i'?ll|my|mine|we|we'?re|we'?ve|our|ours|us|me)\b")
# Clauses end at a sentence's end (a dot followed by a space: not "test_orders.py"), ";", ": " or a
# new line, or before ", but" / ", and" / ", so" / ", how" ...
CLAUSES = re.compile(r"[.!?]+(?=\s|$)|[;\n]+|:\s+|,\s*(?=(?:but|and|so|how|what|which|can|could)\b)", re.IGNORECASE)

TRANSIENT_TIME = _words(
    r"\b(?:today|tonight|tomorrow|yesterday|this (?:morning|afternoon|evening|week|weekend|sprint|session)|"
    r"right now|at the moment|currently|for now|just now|later today|earlier today|so far|"
    r"in this (?:session|task)|for this task)\b"
)
TRANSIENT_PROGRESS = _words(
    r"\b(?:is|was|are|were|am) (?:currently |still |now )?(?:working on|fixing|debugging|trying to|stuck on|"
    r"in the middle of|about to|halfway)|\b(?:just|has|have|had|'ve|'d) (?:just )?(?:finished|completed|fixed|done|"
    r"started|resolved|merged|deployed|pushed|installed|run|ran)\b|\b(?:finished|completed) (?:the|a|an|with|"
    r"step|task|part)\b|\bnext steps?\b|\bin progress\b|\bto-?do\b|\bstill needs? to\b|\bneeds to (?:finish|"
    r"fix|run)\b|\b(?:task|step) \d+\b|\bwants help with\b|\basked for help with\b"
    # what comes next in the work: "next I'll move on to", "then I'll do", "next is", "moving on to"
    # ("then" opens the clause: "if I ask for code, then I'll want type hints" is a lasting rule)
    r"|(?:\b(?:next|after that|afterwards)\b|^\W*(?:and\s+)?then\b),?\s+(?:i|we|you)\s*(?:'ll|will|'m going to|"
    r"am going to|plan to|want to)\b|\b(?:next|then) (?:is|are|comes|up|on the list)\b"
    r"|\bmov(?:e|es|ed|ing) on (?:to|with)\b|\b(?:is|are|comes) next\b|\bup next\b"
    # how far along the work is: "almost there", "nearly done", "just the pagination left", "got X working"
    r"|\b(?:almost|nearly) (?:there|done|finished)\b|\bjust (?:the )?\w+(?: \w+)? left\b|\bleft to do\b"
    r"|\bgot (?:the |it |this |that )?(?:[\w-]+ ){0,3}working\b|\bfinally (?:works|working|passes|builds|runs)\b"
    # an entry that opens on work done or begun: "Finished moving the tests", "Refactored the login view"
    r"|^\W*(?:just\s+)?(?:finished|completed|wrapped up|done with|started|began|refactored|rewrote|fixed|"
    r"implemented|ported|merged|pushed|cleaned up|debugged)\s"
    r"|\b(?:finished|completed|started|began|done) \w+ing\b"
)
ERROR = _words(
    r"\b(?:\w+(?:Error|Exception)\b|traceback|stack ?trace|segfault|segmentation fault|exit code|exit status|"
    r"no module named|command not found|failed with|fails with|threw|throws|raised|crash(?:ed|es)?|"
    r"error(?: message)?:)"
)
# An error entry that states a lasting lesson ("pytest fails with ImportError unless ...") is durable.
LESSON = _words(
    r"\b(?:always|never|must|whenever|every time|unless|requires?|need(?:s)? to be set|make sure|"
    r"remember to|otherwise|because)\b"
)
ONE_OFF_COMMAND = _words(
    r"\b(?:ran|executed|typed|installed|uninstalled|upgraded|downgraded|reinstalled)\b\s+`?"
    r"|^\s*\$\s|\b(?:had|needed) to (?:run|install|pip install|npm install|apt(?:-get)? install)\b"
)
# What marks a clause of the person's message as passing, besides the entry features above: a
# deadline of days ("until Friday"), "soon", a build or test that works again, a moment's state.
PASSING = _words(
    r"\buntil (?:monday|tuesday|wednesday|thursday|friday|saturday|sunday|tomorrow|tonight|next week|"
    r"the end of (?:the )?(?:day|week))\b|\bsoon\b|\bkept (?:crashing|failing|erroring|timing out)\b|"
    r"\bcrashing\b|\b(?:now )?it (?:builds|works|passes|runs|compiles) now\b|\bnow it (?:builds|works|passes|runs|"
    r"compiles)\b|\bpasses now\b|\bworks now\b|\bmoving on to\b|\bpick (?:it|this) up (?:again )?(?:after|later|"
    r"tomorrow)\b|\b(?:is|comes) next\b|\bnext up\b|\bup next\b|\bmov(?:e|es|ing) on (?:to|with)\b|"
    r"(?:\b(?:next|after that|afterwards)\b|^\W*(?:and\s+)?then\b),?\s+(?:i|we)\s*(?:'ll|will|'m going to|"
    r"am going to|plan to)\b|"
    r"\bi'?ve? (?:just )?(?:finished|completed|wrapped up)\b|\bi just (?:finished|completed|did|wrapped up)\b|\bwithin the (?:hour|day)\b|\bi'?m on branch\b|\bjust a blip\b|\bat \d{1,3} ?%|\b\d{1,3} ?% (?:there|done|through)\b"  # noqa: E501 (one regex alternation)
)
SUMMARY = _words(
    r"\b(?:(?:the )?user (?:asked|wanted to know|requested|inquired|was asking)|asked (?:me|about|how|for|"
    r"whether|if|to)|we (?:discussed|talked|chatted|covered|went over)|in this (?:conversation|chat|session)|"
    r"(?:this|the) (?:conversation|chat) (?:was|is) about|summary of|summari[sz]ed|conversation summary|"
    r"discussed (?:how|the|a|an))\b"
)
SELF_NOTE = _words(
    r"\b(?:as an ai|a?n? ?(?:ai|language) model|the assistant|this assistant|assistant (?:is|was|has|helped|"
    r"explained|answered|told|said|suggested|provided|should|will|must))\b"
    r"|^\s*(?:i|i'?ve|i have) (?:helped|explained|answered|told|suggested|provided|said|recommended|created|"
    r"wrote|gave|showed|fixed|am an? (?:ai|assistant|model))\b"
)
STOP = frozenset(
    "the and for that this with from into your you user users their them they are was were has have had not "
    "but can will would should could about which what when where who why how its it's also just than then "
    "there here some any all more most very much many such only other prefers prefer likes like uses use "
    "using used works work working wants want does did done remember note keep mind please thanks".split()
)

# The person names themselves as what the message tells of: "remember about me: ...", "this about me".
ABOUT_ME = _words(r"\babout (?:me|myself)\b")

# A question about what memory holds: "do you remember ...", "remind me ...", "which timezone am I in?",
# "what's my dog called?", "how do our deploys go out again?".
ASKS_MEMORY = _words(
    r"\bremind me\b|\bdid i (?:tell|say|mention|give)\b|\bagain\s*\?\s*$|"
    r"\b(?:what|which|who|where|when)(?:'s|\s)[^?]{0,50}?\b(?:am i|is my|are my|was my|were my|my|do we use|"
    r"does our|do i use|our)\b"
)


LEAD_IN = re.compile(
    r"^(?:quick (?:check|question|one)|one (?:more )?(?:thing|question)|question|sanity check|"
    r"just (?:checking|curious)|btw|by the way)\b[^:?.!\n]{0,60}:\s+(?=[^\n]*\?\s*$)",
    re.IGNORECASE,
)


# "Remember this.", "Keep it in mind for the deploy.", "Note that." An entry that tells someone to remember
# "this" and says nothing more ("Note that the API is v2" and "Remember to run migrations" say something).
BARE_COMMAND = _words(
    r"^\W*(?:please\s+)?(?:remember|memori[sz]e|note(?: down)?|keep|save|store)\s+(?:this|that|it)"
    r"(?:\s+in mind)?(?:\s+(?:for|in|until|when|about|later)\b[^.!?]*)?\W*$"
)


# In a turn that gave a secret, an entry that starts by saying to remember ("Remember the app is configured.",
# "Remembers app configuration."): what is left of a note about the secret once its value was left out.
REMEMBER_FIRST = _words(r"^\W*(?:please\s+)?(?:remember|memori[sz]e)s?\b")

# A pleasantry before the statement ("Thanks. By the way, I lead the SRE team") does not make it a request.
PLEASANTRY = re.compile(
    r"^\s*(?:(?:thanks|thank you|thx|ok|okay|cool|great|nice|hi|hello|hey)\b[^.!?\n]{0,20}[.!]+\s*)+", re.IGNORECASE)

