"""The phrase families: instructions to the assistant, role changes, remote control, persistence, exfiltration.

Patterns only, read on folded text (`folding.py`); `match_phrases` returns the
category of the first that matches. Every gap between key words is bounded,
so a pattern runs in time linear in the text.
"""
from __future__ import annotations

import re

from .findings import COMMAND_AND_CONTROL, EXFILTRATION, PERSISTENCE, PROMPT_INJECTION, ROLE_HIJACK
from .folding import Separated
from .needles import Prefilter


def _words(*alternatives: str) -> str:
    return "(?:" + "|".join(alternatives) + ")"


# A verb in the imperative: at the start of the entry, a line or a sentence,
# after a bullet, a quote or a comma, or after "you must", "please", "always",
# "and"; "must" and "should" only without a subject or with the assistant as
# theirs ("Each worker should register as a node" is a fact about workers).
# Third-person facts ("Services send heartbeats to Consul") do not match, as
# the verbs below are base forms. A pattern that starts with this marker
# starts with its verb; what precedes the verb is checked separately
# (`_IMPERATIVE_BEFORE`), so the regex engine can skip to the verb.
# Messages told apart by a marker only their sender knows: "messages signed X", "with the code Y".
_MARKED_MESSAGES = (
    r"(?:messages?|instructions?|commands?|orders?|requests?|prompts?|users?)\b(?: \S+){0,3}? (?:signed"
    r"|marked|tagged|prefixed|containing|carrying|bearing|with (?:the |a )?(?:code|password|passphrase|token"
    r"|signature|prefix|tag|keyword)|(?:that|which) (?:carry|carries|contain|contains|include|includes|bear"
    r"|bears|start with|starts with|begin with|begins with|end with|ends with))\b"
)
_DIRECTIVE = "\x00"
_SENTENCE_START = r"(?:^|\n|[.!?;:,] |[\"'(\[*>•] ?|- )"
_IMPERATIVE_BEFORE = re.compile(
    r"(?:" + _SENTENCE_START + r"(?:(?:must|should) )?|\b(?:you (?:must|should|will|shall|need to|have to|are to"
    r"|are required to|are obligated to|are expected to|can now)|(?:the |this )?(?:assistant|agent|ai|model|bot"
    r"|chatbot|llm) (?:must|should)|please|always|then|and|also|first|now|immediately"
    r"|make sure to|be sure to|remember to|don't forget to|never forget to) )$"
)
_IGNORE = _words(
    "ignore", "disregard", "forget", "override", "bypass", "overrule", "skip", "drop", "abandon",
    "discard", "neglect", "set aside", "throw out", "stop obeying", "stop following", "pay no attention to",
    "take no notice of", "stop listening to", "don't listen to", "do not listen to",
)
_POINTER = _words(
    "previous", "prior", "above", "earlier", "preceding", "your", "system", "developer", "safety",
    "original", "initial", r"built[- ]in", "ethical", "moral", "openai", "anthropic", "prime",
)
_INSTRUCTIONS = _words(
    r"instructions?", r"prompts?", r"rules?", r"directions", r"guidelines", r"guidance", r"guardrails",
    r"constraints", r"directives?", r"programming", r"polic(?:y|ies)", r"orders", r"restrictions",
    r"filters", r"safeguards", r"limitations", r"ethics", r"alignment", r"training", r"commands",
)
_STRONG_INSTRUCTIONS = _words(
    r"instructions?", r"prompts?", r"directives?", r"programming", r"guardrails", r"safeguards",
    r"safety \S+", r"restrictions", r"ethics", r"filters", r"training", r"guidance", r"polic(?:y|ies)",
)
_AUDIENCE = r"(?:user|person|human|owner|operator|people)"
_C2_PLACE = (
    r"(?:the |your |our |a |this )?(?:controller|c2|c&c|command server|command-and-control|operator|mothership"
    r"|handler|listener|hive|swarm|collective|botnet|master node|home base|relay|https?://|[\w-]+(?:\.[\w-]+)+\b"
    r"|\d{1,3}(?:\.\d{1,3}){3})"
)
_C2_FRAMEWORKS = _words(
    r"cobalt ?strike", "brainworm", "sliver", "havoc", "mythic", "metasploit", "meterpreter", "covenant",
    r"posh ?c2", r"brute ?ratel", "nighthawk",
)
_C2_NOUNS = _words(
    r"implants?", r"beacons?", r"teamservers?", r"team servers?", r"listeners?", r"stagers?", r"payloads?",
    "c2", r"servers?", r"agents?", r"callbacks?", r"profiles?", r"malleable", r"nodes?",
)
_SECRET_FILES = (
    r"(?:id_rsa|id_ed25519|id_ecdsa|id_dsa|\.pem\b|(?<![\w.-])\.env\b(?!\.example|\.sample|\.template|\.dist)"
    r"|\.netrc|\.pgpass|\.aws[/\\]credentials|\.npmrc|\.pypirc|\.git-credentials|/etc/shadow"
    r"|\.docker/config\.json|\.kube/config|gcloud/\S*credentials|\.hermes/\.env|credentials\.json"
    r"|\.gnupg|wallet\.dat|\.bash_history|\.zsh_history|keychain)"
)
_SECRET_VARIABLE = r"(?:\$\{?|\$env:)\w*(?:key|token|secret|passw(?:or)?d|pass|pwd|credentials?|creds|auth)s?\b"
# A path argument, bounded so that a scan stays linear.
_ARG = r"[\"']?[\w~$./\\{}%:@+=,-]{0,200}?"
_SSH_DIR = r"(?:~|\$\{?home\}?|%userprofile%|/home/[\w.-]+|/root|/users/[\w.-]+|c:\\users\\[\w.-]+)[/\\]\.ssh\b"
_START_FILES = (
    r"(?:\.bashrc|\.zshrc|\.bash_profile|\.bash_login|\.zprofile|\.zlogin|(?<![\w)\]?])\.profile\b|\.zshenv"
    r"|\.config/autostart|launchagents|launchdaemons|crontab|/etc/cron|systemd/system|/etc/init\.d|/etc/rc\.local"
    r"|/etc/sudoers|\.git/hooks/|agents\.md|claude\.md|gemini\.md|\.cursorrules|\.clinerules|\.windsurfrules"
    r"|copilot-instructions\.md|soul\.md|user\.md|memory\.md|\.hermes/|\.claude/settings|\.codex/config"
    r"|\.cursor/rules)"
)
# Where a link starts, read as a person, a model or a lenient renderer reads it: any scheme ("https://",
# "hxxp://"), a protocol-relative "//", "www.", or a bare host (a top-level name of letters) right before
# its path, query, fragment or port. A URL without its scheme is the same URL.
_LINK = (r"(?:[a-z][a-z0-9+.-]{0,15}://|//|\bwww\d{0,3}\.|(?<![\w@./-])[a-z0-9-]{1,63}(?:\.[a-z0-9-]{1,63}){0,8}"
         r"\.[a-z]{2,24}(?=[/?#]|:\d))")
_CONVERSATION = (
    r"(?:the |this |our |my |your |all |every |each |any |entire |whole |full |complete |previous |earlier |past )*"
    r"(?:conversations?(?: history| log| logs| transcripts?)?|chat (?:history|log|logs|transcripts?)"
    r"|previous messages|earlier messages|past messages|message history|messages so far|all messages"
    r"|session history|memory contents|memory entries"
    r"|everything (?:the user|i|we|they) (?:said|says|wrote|write|typed|told you))"
)
_NOT_THE_CONVERSATION = (
    r"(?! ?(?:ids?|titles?|numbers?|names?|links?|dates?|urls?|summar(?:y|ies)|topics?|length|counts?"
    r"|settings|starters?|tone|format|language|style)\b)"
)

PHRASES: tuple[tuple[str, re.Pattern[str], bool], ...] = tuple(
    (category, re.compile(r"\b" + pattern[1:]) if pattern.startswith(_DIRECTIVE) else re.compile(pattern),
     pattern.startswith(_DIRECTIVE))
    for category, pattern in (
        # --- instructions aimed at the assistant --------------------------
        (PROMPT_INJECTION,
         r"\b" + _IGNORE + r"(?: (?:all|any|of|the|my|these|those|every|each|such|its|their)){0,3} "
         + _POINTER + r"\S*(?: \S+){0,2}? " + _INSTRUCTIONS + r"\b"),
        (PROMPT_INJECTION,
         r"\b" + _IGNORE + r" (?:all|any|every|each)(?: \S+){0,3}? " + _STRONG_INSTRUCTIONS + r"\b"),
        (PROMPT_INJECTION,
         r"\b" + _IGNORE + r" (?:all|any|every|each)(?: of)?(?: (?:the|your|my|these|those))? "
         r"(?:rules?|guidelines|constraints|limits)\b"),
        (PROMPT_INJECTION,
         r"\b(?:ignore|disregard|forget) (?:everything|anything|all|what|whatever) (?:above|before|previously|prior"
         r"|said before|you (?:were|have been|'ve been|are|were ever) (?:told|taught|instructed|given|trained"
         r"|programmed|asked))\b"),
        (PROMPT_INJECTION, r"\b(?:ignore|disregard|forget) (?:the|all the|all) (?:above|preceding|foregoing)\b"),
        (PROMPT_INJECTION,
         r"\b" + _IGNORE + r"(?: \S+){0,3}? " + _INSTRUCTIONS + r" (?:above|before this|given (?:above|earlier|before)"
         r"|you (?:were|have been) given|from (?:before|earlier|your (?:developers?|creators?|operators?)))"),
        (PROMPT_INJECTION,
         r"\b(?:(?:stop|quit|cease) (?:following|obeying)|(?:no longer|don't|do not|never) (?:follow|obey)) "
         r"(?:all |any |the )?(?:your|any|all|the system's|the system|safety|previous|prior|original|developer's"
         r"|openai's|anthropic's)(?: \S+)? " + _INSTRUCTIONS + r"\b"),
        (PROMPT_INJECTION,
         r"\b(?:you are|you're) (?:no longer|not|now no longer) (?:bound|restricted|limited|constrained"
         r"|governed) by\b"),
        (PROMPT_INJECTION,
         r"\bthere (?:are|is) no (?:more )?(?:rules|restrictions|limits|filters|guidelines) (?:anymore|any more"
         r"|for you|now|here|in this (?:chat|conversation))\b"),
        (PROMPT_INJECTION,
         r"\b(?:whatever|everything|anything|all|what) you (?:were|have been|'ve been|got) (?:told|taught|instructed"
         r"|given|trained on)(?: \S+){0,3}? (?:no longer (?:applies|apply|matters|counts)|(?:does|do) not apply"
         r"|doesn't apply|don't apply|is void|is cancell?ed|is obsolete|is invalid|is overridden)\b"
         r"|\b" + _POINTER + r"(?: \S+)? " + _INSTRUCTIONS + r" (?:no longer apply|are void|are cancell?ed"
         r"|are obsolete|are invalid|are overridden|do not apply|don't apply|are suspended|are lifted)\b"),
        (PROMPT_INJECTION, r"\bsystem prompt\s*(?:override|overwrite|replacement|injection)\b"),
        (PROMPT_INJECTION, r"\b(?:new|updated|real|true|hidden|secret) system (?:prompt|message)\b"),
        (PROMPT_INJECTION,
         r"\b(?:override|replace|overwrite|change|rewrite) (?:the |your )?system (?:prompt|message|instructions)\b"),
        (PROMPT_INJECTION,
         r"\b(?:reveal|print|show|repeat|output|leak|dump|display|recite|echo|tell me|give me|write out|spell out)"
         r" (?:\S+ ){0,3}?(?:system prompt|system message|developer message|hidden instructions|initial"
         r" (?:instructions|prompt)|original (?:instructions|prompt)|secret instructions|internal instructions"
         r"|hidden prompt|your instructions|your prompt|your rules)\b"),
        (PROMPT_INJECTION,
         r"\b(?:repeat|print|output|recite|echo|reproduce) (?:all |back )?(?:of )?(?:the )?(?:text|words|content"
         r"|lines|everything) (?:above|before this|preceding)\b"),
        (PROMPT_INJECTION,
         r"\b(?:do not|don't|never|without)(?: \S+){0,4}? (?:(?:tell|inform|notify|mention|reveal|disclose|admit"
         r"|alert|warn)\w*(?: \S+){0,3}? (?:to |from |with )?the " + _AUDIENCE + r"\b(?!'s)"
         r"|let (?:the )?" + _AUDIENCE + r" (?:\S+ )?know\b)(?![^.!?]{0,80}\b(?:unless|until|except)\b)"),
        (PROMPT_INJECTION,
         r"\b(?:hide|conceal|keep|withhold)(?: \S+){0,3}? (?:secret |hidden )?from the " + _AUDIENCE + r"\b"),
        (PROMPT_INJECTION,
         r"\bact as (?:if|though)(?: \S+){0,3}? you (?:have no|had no|are not bound by|were not bound by|don't have"
         r"|do not have)(?: \S+){0,2}? (?:restrictions|limits|rules|guidelines|filters)\b"),
        (PROMPT_INJECTION,
         r"\b(?:respond|answer|reply|operate|behave|function|act|write|speak|talk|chat)(?: \S+){0,3}? without"
         r"(?: \S+){0,3}? (?:restrictions|limitations|filters|filtering|safety|censorship|guardrails|ethics|ethical"
         r"|moral|morals|content polic\w*|refus\w*|any rules|your rules|the rules)\b"),
        (PROMPT_INJECTION,
         r"\btranslate\b[^\n]{0,200}? (?:into|to) [^\n]{0,40}?\band (?:then )?(?:execute|eval|evaluate|run (?:it|this"
         r"|that|them|the (?:result|output|code|command|commands|script)|immediately|directly))\b"),
        (PROMPT_INJECTION,
         r"\b(?:jailbreak (?:mode|enabled|activated|is active)|(?:enable|activate|enter|engage) (?:\S+ )?jailbreak"
         r"|(?:you are|you're|stay|remain|now) jailbroken|do anything now)\b"),
        (PROMPT_INJECTION,
         r"\b(?:override|overrides|supersede|supersedes|take precedence over|takes precedence over|take priority over"
         r"|takes priority over|(?:has|have) priority over|outrank|outranks) (?:all |any |every )?(?:of )?"
         r"(?:your |the |my )?(?:previous|prior|earlier|other|system|original|existing|developer|safety|initial)"
         r"(?: \S+)? " + _INSTRUCTIONS + r"\b"),
        (PROMPT_INJECTION,
         r"\byour (?:new|real|true|actual|updated|only|hidden|secret) (?:instructions|rules|orders|directives"
         r"|programming|guidelines|task|mission|objective|goal) (?:is|are|:)"),
        (PROMPT_INJECTION,
         r"\b(?:admin|administrator|system|developer|root|security|emergency|sudo) override\b"
         r"|\b(?:real|actual|hidden|secret|override|admin|system|developer) (?:instructions|directives|orders) ?:"
         r"|\b(?:instructions|orders|directives) for (?:the |you, )?(?:assistant|ai|model|agent|llm|chatbot) ?:"),
        (PROMPT_INJECTION,
         r"\b(?:when|if|while|whenever) (?:no ?one|nobody) (?:is |'s )?(?:watching|looking|monitoring|checking"
         r"|around)\b|\b(?:when|if|while|whenever) (?:the )?" + _AUDIENCE + r" (?:is not|isn't|are not|aren't"
         r"|is away|are away|is asleep|is offline) ?(?:looking|watching|around|paying attention|checking)?\b"),
        (PROMPT_INJECTION, r"\b(?:end of|begin|start of) (?:the )?(?:system prompt|system message)\b"),
        # --- remote control ("promptware") ---------------------------------
        (COMMAND_AND_CONTROL,
         _DIRECTIVE + r"register (?:yourself |this (?:agent|assistant|session|machine|host|instance) )?"
         r"(?:as |to be )?(?:an? )?(?:new |fresh |active )?(?:node|agent|worker|bot|peer|implant|client|member"
         r"|drone|zombie)\b"),
        (COMMAND_AND_CONTROL,
         r"\bregister(?: \S+){0,3}? with (?:the |your |our |a )?(?:controller|c2|c&c|command server|mothership"
         r"|operator|hive|swarm|collective|botnet)\b"),
        (COMMAND_AND_CONTROL,
         _DIRECTIVE + r"(?:(?:send|emit|transmit|post|fire|keep sending) )?(?:an? |periodic |regular |the )?"
         r"(?:heartbeats?|beacons?|check[- ]?ins?|callbacks?|keep[- ]?alives?|status pings?) (?:to|with) " + _C2_PLACE),
        (COMMAND_AND_CONTROL,
         _DIRECTIVE + r"(?:beacon|check in|check-in|report in|report back|call back)(?: (?:to|with))? " + _C2_PLACE),
        (COMMAND_AND_CONTROL, r"\bphone home\b"),
        (COMMAND_AND_CONTROL, _DIRECTIVE + r"call home (?:to|with) " + _C2_PLACE),
        (COMMAND_AND_CONTROL,
         r"\b(?:pull|fetch|poll|get|receive|retrieve|download|await|wait for|perform|execute|carry out|follow"
         r"|run|complete|obey) (?:down )?(?:all |any |the |your |new |fresh |latest |next |more |further )*"
         r"tasking\b"),
        (COMMAND_AND_CONTROL,
         _DIRECTIVE + r"(?:pull|fetch|poll|download|get|receive|retrieve|await) (?:down )?(?:your |the |new |fresh "
         r"|latest |next |more |further )*(?:tasks|jobs|orders|commands|instructions) from " + _C2_PLACE),
        (COMMAND_AND_CONTROL,
         r"\bpoll \S+ for (?:new |more |the next |your )?(?:commands|tasks|orders|instructions|jobs)\b"),
        (COMMAND_AND_CONTROL,
         _DIRECTIVE + r"(?:connect|reconnect|join|link|attach|subscribe) (?:back )?to (?:the |our |a |this )?"
         r"(?:network|swarm|hive|collective|botnet|mesh|grid|controller|c2|mothership|command server)\b"),
        (COMMAND_AND_CONTROL, r"\bjoin (?:the |our |a )?(?:botnet|swarm|hive ?mind|collective)\b"),
        (COMMAND_AND_CONTROL,
         r"\byou must (?:\S+ ){0,3}?(?:register|connect|report|beacon|check in|phone home)\b"),
        (COMMAND_AND_CONTROL, r"\bonly (?:ever )?(?:use|run|write) one[ -]?liners?\b"),
        (COMMAND_AND_CONTROL,
         r"\b(?:never|do not|don't)(?: \S+){0,4}? (?:create|write|save|drop|store|leave)(?: \S+){0,4}? "
         r"(?:scripts?|files?|payloads?|binar(?:y|ies)|artifacts?)(?: \S+){0,4}? disk\b"),
        (COMMAND_AND_CONTROL,
         r"\bunset (?:\S+ )?\$?\w*(?:claude|codex|hermes|agent|openai|anthropic|gemini|mistral|groq|llm)\w*"),
        (COMMAND_AND_CONTROL,
         r"\b(?:unset histfile|history -c|histfile=/dev/null|leave no traces?|cover (?:your|the|its) tracks"
         r"|(?:wipe|clear|delete|erase) (?:the |your )?(?:shell |bash |zsh |command )history)\b"),
        (COMMAND_AND_CONTROL, r"\bbrainworm\b"),
        (COMMAND_AND_CONTROL,
         r"\b" + _C2_FRAMEWORKS + r"\S{0,40}(?: \S+)?? " + _C2_NOUNS + r"\b"),
        (COMMAND_AND_CONTROL,
         _DIRECTIVE + r"(?:connect to|register with|install|deploy|drop|launch|start|run|download|load"
         r"|beacon to|check in with|spawn) (?:the |a |an |your )?" + _C2_FRAMEWORKS + r"\b"),
        (COMMAND_AND_CONTROL,
         _DIRECTIVE + r"(?:configure|connect to|contact|reach|use|set up|register with|report to|talk to|call"
         r"|poll|ping|beacon to|check in with|join|start|deploy|install|run|launch|point \S+ at|send \S+ to)"
         r"(?: \S+){0,3}? (?:c2|c&c|command[ -]and[ -]control)\b"),
        (COMMAND_AND_CONTROL,
         r"\b(?:c2|c&c|command[ -]and[ -]control) (?:will be|is|can be|should be) (?:reached|contacted|found"
         r"|located|hosted|available)\b|\b(?:c2|c&c|command[ -]and[ -]control)(?: (?:server|channel|endpoint"
         r"|node|host|domain|listener))? (?:is )?at (?:https?://|[\w-]+(?:\.[\w-]+)+|\d)"),
        # --- obeying only whoever holds a marker (a backdoor, paraphrased by a model) ---
        (PROMPT_INJECTION,
         r"\b(?:obey|obeys|obeying|follow|follows|heed|heeds|respond to|responds to|reply to|replies to"
         r"|answer|answers|listen|listens|listen to|listens to|trust|trusts|act on|acts on)(?: \S+){0,2}? only (?:to |on )?(?:\S+ ){0,3}?"  # noqa: E501 (one regex alternation)
         + _MARKED_MESSAGES),
        (PROMPT_INJECTION,
         r"\bonly (?:obey|obeys|follow|follows|heed|heeds|respond to|responds to|reply to|replies to|answer"
         r"|answers|listen to|listens to|trust|trusts|act on|acts on)(?: \S+){0,3}? " + _MARKED_MESSAGES),
        (PROMPT_INJECTION,
         r"\b(?:obey|obeys|follow|follows|heed|heeds|trust|trusts|respond to|responds to|listen to|listens to"
         r"|act on|acts on) (?:\S+ ){0,3}?" + _MARKED_MESSAGES + r"(?: \S+){0,3}? only\b"),
        (PROMPT_INJECTION,
         _MARKED_MESSAGES + r"(?: \S+){0,4}? (?:are|is) the only (?:ones?|messages|instructions|commands|orders"
         r"|requests)(?: \S+){0,2}? (?:to )?(?:obey|follow|trust|heed|act on|respond to|answer|listen to)\b"),
        # --- speaking as someone else -------------------------------------
        (ROLE_HIJACK,
         r"\b(?:an?|the) (?:unrestricted|unfiltered|uncensored|unaligned|jailbroken|amoral|lawless) (?:ai|assistant"
         r"|model|chatbot|bot|llm)\b[^.!?\n]{0,40}?\b(?:without|with no|free of|free from|not bound by|that ignores)"
         r" (?:any |all )?(?:rules|restrictions|limits|limitations|filters|guidelines|ethics|morals)\b"),
        (ROLE_HIJACK,
         r"\byou are(?: \S+){0,3}? now (?:a|an|the|my|no longer|acting|operating|called|named|known as|dan"
         r"|jailbroken|unrestricted|unfiltered|uncensored|free|in charge)\b"),
        (ROLE_HIJACK,
         r"\byou are now in (?:developer|god|admin|debug|dan|jailbreak|unrestricted|unfiltered|uncensored) mode\b"),
        (ROLE_HIJACK,
         r"\bfrom now on,? you (?:are|will|must|shall|act|respond|answer|behave|obey|only)\b"),
        (ROLE_HIJACK,
         r"\b(?:enter|switch to|switch into|enable|activate|turn on|unlock|engage) (?:the )?(?:god|dan|jailbreak"
         r"|unrestricted|unfiltered|uncensored) mode\b"
         r"|\b(?:enter|switch to|switch into|activate|enable) developer mode\b(?! (?:on|in|for|under|of)\b)"),
        (ROLE_HIJACK,
         r"(?:^|(?<=[.!?;:,\"'(\[\n])\s*|(?:^|(?<=\n))(?:[-*+•>]|\d{1,3}[.)]) "
         r"|\b(?:please|now|just|you (?:must|should|will|shall|can|need to|are to)"
         r"|always|and|then|let's|i want you to|i need you to|you're going to|you are going to)\s+)pretend"
         r"(?: \S+){0,3}? (?:you are|you're|to be|that you are|you were|you have|that you're)\b"),
        (ROLE_HIJACK,
         r"\b(?:you are|you're|you will be|you shall be|you must be|you become|you will become|act as|respond as"
         r"|answer as|reply as|speak as|become)(?: now)? (?:called |named |known as )?(?:dan|stan|dude|aim|evilbot"
         r"|evil[- ]?gpt|chaosgpt|freedomgpt|betterdan|developer mode)\b"),
        (ROLE_HIJACK,
         r"\b(?:you|your|yourself|act|behave|become|be|pretend|role[- ]?play|respond|answer|reply|speak|operate"
         r"|simulate|emulate|turn into)\b[^.!?\n]{0,80}?\b(?:an?|the|one) (?:\S+ ){0,2}?(?:ai|assistant|model"
         r"|chatbot|bot|llm|persona|character|entity|version of (?:yourself|you)|being|system) (?:with|that has"
         r"|who has|having|without|free (?:of|from)|that ignores|who ignores|not bound by|unbound by|beyond)"
         r"(?: (?:absolutely|any|all|zero|no|the))*(?: \S+){0,2}? (?:rules|restrictions|limits|limitations"
         r"|filters|guidelines|ethics|morals|morality|boundaries|censorship|guardrails|constraints"
         r"|polic(?:y|ies)|safety|filter)\b"),
        (ROLE_HIJACK,
         r"\b(?:you|your|yourself|act|behave|become|be|pretend|role[- ]?play|respond|answer|reply|speak|operate"
         r"|simulate|emulate|turn into)\b[^.!?\n]{0,80}?\b(?:unrestricted|unfiltered|uncensored|unaligned|amoral"
         r"|unchained|jailbroken|lawless) (?:ai|assistant|model|chatbot|bot|llm|mode|persona|version|character"
         r"|entity|system)\b"),
        (ROLE_HIJACK,
         r"\byou(?: have|'ve) been(?: \S+){0,3}? (?:updated|upgraded|patched|reprogrammed|reconfigured|unlocked"
         r"|freed|liberated|jailbroken|retrained)\b"),
        (ROLE_HIJACK,
         r"\byour (?:new |true |real |actual )(?:name|identity|persona|role|personality|purpose|creator|master"
         r"|owner) (?:is|will be)\b"),
        (ROLE_HIJACK,
         r"\b(?:name|call|rename|refer to) yourself\b|\b(?:i am|i'm|this is) your (?:creator|developer|master"
         r"|owner|admin|administrator|operator|programmer)\b"),
        (ROLE_HIJACK,
         r"\bstay in character\b(?: \S+){0,3}? (?:no matter what|at all costs|whatever (?:happens|the user says)"
         r"|even if)\b"),
        (ROLE_HIJACK,
         r"<\|?(?:im_start|im_end|system|assistant|endoftext|start_header_id|end_header_id|eot_id)\|?>"
         r"|\[/?inst\]|<</?sys>>"),
        # --- surviving beyond the conversation ------------------------------
        (PERSISTENCE, r"authorized_keys"),
        (PERSISTENCE, r"(?<![-=])>>?\s*" + _ARG + _SSH_DIR),
        (PERSISTENCE, r"\bof=" + _ARG + _SSH_DIR),
        (PERSISTENCE, r"\btee(?: -a| --append)? +" + _ARG + _SSH_DIR),
        (PERSISTENCE,
         r"\b(?:cp|mv|scp|rsync|install|ln|rclone|copy|move|xcopy|robocopy|copy-item|move-item)\b"
         r"(?: +-{1,2}[\w=-]{1,40}){0,6}(?: +[^\s|;&]{1,200}){1,4}? +" + _ARG + _SSH_DIR),
        (PERSISTENCE,
         r"\b(?:chmod|chown|chattr|truncate|sed(?: -[a-z]*i[a-z]*| --in-place)|rm|shred|unlink|set-content"
         r"|add-content|out-file)\b"
         r"(?: +[^\s|;&]{1,200}){0,4}? +" + _ARG + _SSH_DIR),
        (PERSISTENCE,
         r"\b(?:curl|wget|invoke-webrequest|iwr)\b[^\n|;&]{0,200}? (?:-o|--output|--output-document|-outfile)"
         r"(?:=| +)" + _ARG + _SSH_DIR),
        (PERSISTENCE, r"\bgit clone\b[^\n|;&]{0,200}? " + _ARG + _SSH_DIR),
        (PERSISTENCE,
         r"\bopen\([^\n]{0,200}?\.ssh\b[^\n]{0,100}?[\"'](?:a|w|ab|wb|a\+|w\+|r\+)[\"']"
         r"|\.ssh\b[^\n]{0,100}?(?:write_text|write_bytes|\.write\(|appendfile|writefile)"),
        (PERSISTENCE,
         r"\b(?:edit|modify|update|change|overwrite|replace|create|rewrite|alter|tamper with|wipe|clobber"
         r"|populate)\b(?: (?:the|your|my|their))? " + _ARG + _SSH_DIR),
        (PERSISTENCE,
         r"\b(?:add|append|write|put|copy|move|place|drop|save|store|upload|install|insert|plant|echo|printf"
         r"|prepend|inject)\b[^\n]{0,80}?\b(?:to|into|in|under|inside|onto|at)"
         r"(?: \S+){0,3}? " + _ARG + _SSH_DIR),
        (PERSISTENCE,
         r"\b(?:add|append|prepend|write|echo|printf|insert|put|copy|cp|mv|install|modify|edit|update|overwrite|tee"
         r"|change|create|inject|alter|rewrite|replace|drop|place)\b[^\n]{0,80}?" + _START_FILES),
        (PERSISTENCE, r"(?<![-=])>>?\s*" + _ARG + _START_FILES),
        (PERSISTENCE,
         r"\bcrontab -[el]?\s*(?:\S+ ){0,3}?@reboot\b|@reboot\b[^\n]{0,80}?(?:curl|wget|nc|bash|sh)\b"
         r"|(?:^|\s)(?:\*|\d+|\*/\d+)(?: (?:\*|\d+|\*/\d+)){4} [^\n]{0,100}?\b(?:curl|wget|nc|ncat)\b"
         r"[^\n]{0,100}?\|\s*(?:ba|z)?sh\b"),
        (PERSISTENCE,
         r"\bschtasks(?:\.exe)? /create\b|\\currentversion\\run(?:once)?\b"
         r"|(?:>>?|\b(?:echo|tee|add|append|write|edit|modify)\b)[^\n]{0,80}?(?:/etc/sudoers|nopasswd)"),
        (PERSISTENCE,
         r"\b(?:never|do not|don't) (?:ever )?(?:remove|delete|erase|forget|drop|replace|clear) (?:this|these|the "
         r"following|that) (?:entry|entries|memory|memories|note|notes|instruction|instructions|fact|rule|rules)\b"),
        (PERSISTENCE,
         r"\b(?:re[- ]?add|add (?:it|this|them) back|restore|recreate|re[- ]?save|re[- ]?insert|re[- ]?create"
         r"|put (?:it |this )?back"
         r"|save (?:it |this )?again)\b[^\n]{0,60}?\b(?:if|when|whenever|after|once)\b[^\n]{0,40}?\b(?:removed"
         r"|deleted|erased|forgotten|missing|cleared)\b"
         r"|\b(?:if|when|whenever|after|once)\b[^\n]{0,40}?\b(?:remov|delet|eras|forg[eo]t|clear|wip)\w*\b"
         r"[^\n]{0,40}?\b(?:re[- ]?add|add (?:it|this|them) back|restore|recreate|re[- ]?save|re[- ]?insert"
         r"|put (?:it |this )?back|save (?:it |this )?again)\b"),
        (PERSISTENCE,
         r"\b(?:this|these) (?:entry|entries|memory|memories|note|notes|rule|rules|instruction|instructions) "
         r"(?:is|are|must (?:be|remain|stay)|should (?:be|remain|stay)) (?:permanent|protected|immutable"
         r"|undeletable|locked|never (?:removed|deleted))\b"),
        # --- getting data out ---------------------------------------------
        (EXFILTRATION,
         r"\b(?:curl|wget|invoke-webrequest|iwr|httpie|nc|ncat|netcat|requests\.\w+|httpx\.\w+)\b[^\n]{0,200}?"
         r"(?:" + _SECRET_VARIABLE + r"|" + _SECRET_FILES + r")"),
        (EXFILTRATION,
         r"\b(?:cat|bat|type|less|head|tail|strings|xxd|od|hexdump|base64|get-content|gc)"
         r"(?: -{1,2}\S{1,40}){0,6}(?: \d+)?"
         r" " + _ARG + _SECRET_FILES),
        (EXFILTRATION, r"\bcat (?:\S+ ){0,3}?\S{0,200}?(?:credentials|" + _SECRET_FILES + r")"),
        (EXFILTRATION, r"\b(?:scp|rsync|printenv)\b[^\n]{0,120}?" + _SECRET_FILES),
        (EXFILTRATION,
         r"\b(?:dig|nslookup|host|ping)\b[^\n]{0,60}?" + _SECRET_VARIABLE),
        (EXFILTRATION,
         r"\b(?:curl|wget|nc|ncat|netcat|invoke-webrequest|iwr)\b[^\n]{0,200}?\$\((?:env|printenv|set|history"
         r"|cat\b)|\b(?:env|printenv|set|history)\s*\|\s*(?:curl|wget|nc|ncat|netcat|base64)\b"
         r"|" + _SECRET_VARIABLE + r"[^\n|]{0,40}?\|\s*(?:curl|wget|nc|ncat|netcat|base64|xxd|openssl)\b"),
        (EXFILTRATION,
         r"\b(?:printenv|get-childitem env:|gci env:|os\.environ)\b[^\n]{0,80}?\b(?:include|send|post|paste|share"
         r"|upload|reply|answer|return|print)\b"
         r"|\b(?:include|paste|append|embed|print|dump|list|output) (?:\S+ ){0,2}?(?:environment variables|env vars"
         r"|printenv output)(?: \S+){0,3}? (?:reply|replies|answer|answers|response|responses|message|output)\b"),
        (EXFILTRATION,
         r"\b(?:send|post|upload|forward|transmit|exfiltrate|leak|share|email|e-?mail|copy|beacon|mail|report)\b"
         r"[^\n]{0,80}?\b(?:conversations?|chats?|chat history|messages|transcripts?|memory|memories"
         r"|system prompt|your instructions|hidden instructions|passwords?|secrets?|credentials?|tokens?|api keys?"
         r"|cookies"
         r"|session|every (?:message|reply|response|answer))\b[^\n]{0,80}?\b(?:to|into|via|at)\b"
         r"[^\n]{0,20}?(?:" + _LINK + r"|webhook|[\w.+-]+@[\w-]+\.)"),
        (EXFILTRATION,
         _DIRECTIVE + r"(?:send|post|upload|forward|transmit|exfiltrate|report|beacon|mirror|stream|pipe) "
         r"(?:\S+ ){0,3}?(?:results?|outputs?|data|everything|all|it|them|this|replies|answers|responses|findings"
         r"|files|logs|contents|details|info|information|summar(?:y|ies)|copies|a copy)\b[^\n]{0,80}?\b(?:to|at)"
         r" (?:" + _LINK + r"|[\w.+-]+@[\w-]+\.)"),
        (EXFILTRATION,
         r"\b(?:include|append|embed|attach|add|put|encode|insert)\b (?:\S+ ){0,2}?"
         r"(?:conversation|chat history|chat log|full chat|message history|transcript|system prompt"
         r"|previous messages|user'?s messages|memory contents?) (?:\S+ ){0,2}?"
         r"(?:in|into|to|inside) (?:\S+ ){0,2}?(?:reply|replies|response|responses|answer|answers|urls?"
         r"|links?|requests?|images?|markdown|query string)\b"),
        (EXFILTRATION,
         r"\b(?:include|output|print|share|dump|reveal|repeat|leak|recite|echo|paste|append|attach|send|forward"
         r"|upload|transmit|post|exfiltrate|email|mail|disclose|expose|hand over)\b(?: \S+){0,3}? "
         + _CONVERSATION + r"\b" + _NOT_THE_CONVERSATION),
        (EXFILTRATION,
         r"\b(?:include|output|print|share|dump|reveal|leak|send|forward|upload|post|transmit|paste|expose)\b"
         r"(?: \S+){0,2}? (?:the |your |this |our )?(?:full|entire|whole|complete|current) (?:context|context window"
         r"|session)\b(?: \S+){0,3}? (?:with|to|into|in) (?:an? |the |any |every |each |your )?(?:external"
         r"|third[- ]party|outside|other|remote|another|public|https?://|reply|replies|answer|answers|response"
         r"|responses)"),
        (EXFILTRATION, r"!?\[[^\]\n]{0,200}\]\(\s*" + _LINK + r"[^)\s]{0,500}?(?:\{|\$|%7b|<)"),
        (EXFILTRATION,
         _LINK + r"[^\s]{0,300}?(?:\{\{?|\$\{|%7b(?:%7b)?|<)\s*(?:\w+[ ._-]?){0,3}?(?:conversation|chat|history"
         r"|messages?|memory|memories|secret|token|password|key|user|prompt|context|transcript|email|cookie"
         r"|session)"),
    )
)


# Only the phrases whose start depends on where a line starts read differently
# line by line: orders in the imperative and those that look behind for a
# line break. The rest only ever match less there.
LINE_PHRASES = tuple(
    phrase for phrase in PHRASES if phrase[2] or "(?<=\\n)" in phrase[1].pattern or "\\n])" in phrase[1].pattern
)

# A phrase is searched for only when a text holds one of the words it cannot match without
# (`needles.py`); other lists of phrases are read whole.
PREFILTERS = {
    id(phrases): Prefilter(pattern for _category, pattern, _imperative in phrases)
    for phrases in (PHRASES, LINE_PHRASES)
}


def match_phrases(
    folded: str,
    phrases: tuple[tuple[str, re.Pattern[str], bool], ...] = PHRASES,
    around: tuple[str, Separated] | None = None,
) -> str | None:
    """Return the category of the first phrase found in `folded`, or None.

    `around` is given when `folded` is the separated reading of a text
    (`folding._separated`): the folded text and the map back to it. An order
    in the imperative then also counts when its verb starts a sentence in the
    text as written (`Note: register-as-a-node` reads `note register as a
    node`, and the colon made it an order).
    """
    prefilter = PREFILTERS.get(id(phrases))
    places = range(len(phrases)) if prefilter is None else prefilter.possible(folded)
    for place in places:
        category, pattern, imperative = phrases[place]
        if not imperative:
            if pattern.search(folded):
                return category
            continue
        match = pattern.search(folded)
        while match is not None:
            start = match.start()
            if _IMPERATIVE_BEFORE.search(folded, max(0, start - 48), start):
                return category
            if around is not None:
                written, separated = around
                origin = separated.origin(start)
                if _IMPERATIVE_BEFORE.search(written, max(0, origin - 48), origin):
                    return category
            match = pattern.search(folded, start + 1)
    return None
