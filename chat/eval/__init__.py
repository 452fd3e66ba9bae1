"""The curation eval: does the model save what the policy says to save, and nothing else?

Tooling, not part of the chat a person uses: `manage.py memory_eval` (`make
eval`) runs it, and nothing in the runtime imports it.

A suite of scenarios (data: `chat/eval/scenarios.json`) runs through the
real turn path, `chat.turns.run_turn` — the service the chat socket and the
REST API use — against whatever model the settings point at: the offline demo
model, a local server or a hosted endpoint. Each scenario gets fresh
throwaway people (`curation-<uuid>`), optional seed memory committed through
`agentmemory.store.commit_operations`, one or more messages, and an
expectation about what memory looks like afterwards. The people and all their
data are deleted when the scenario ends.

Three layers, so the scorer can be tested without a model:

- `run_suite` / `run_scenario` observe: replies, failure codes, tool events,
  latency, the size of the first model request, memory snapshots before
  and after every turn, and the proposals a turn left pending (what trusted
  code offered as a question instead of saving). In a consolidation
  scenario the harness then accepts what was offered (`accept_pending`:
  `proposals.save`, as the person's Save) and reads memory again.
  Observations hold content, in memory only. (`runner.py`)
- `judge` turns one observation into a content-free `ScenarioResult`
  (booleans, counts, codes). (`judging.py`)
- `score` turns results into `Figures` (`scoring.py`); `report_rows`,
  `render_doc` and `results_json` present them (`report.py`).

Each scenario has a language (`en` unless it says otherwise); `score`
also gives the headline figures per language (`Figures.by_language`), and
`language_rows` presents them one column a language.

`split_half` divides the suite into a tuning half and a held-out half
(stratified by kind and language), so a prompt tuned on one half can be checked on the
other. The suite's format, kinds and halves are `scenarios.py`.

Nothing this package prints, writes or returns from `judge` onwards carries
memory content, prompts, answers or tool arguments: only scenario ids, kinds,
codes and numbers.

Dependencies on the turn API are kept to `run_turn`, `TurnFailed` (`.code`,
`.memory`), `TurnResult` (`.reply`, `.memory` with `.status`, `.code`,
`.proposal_id`, `.tool_events` with `.tool`, `.status`, `.operation_count`,
`.code`), `store.load_snapshot` and `agentmemory.proposals` (`pending`, with
each operation's `reason`, and `save`). The prompt
size is measured on the wire, by a request hook on the chat agent's HTTP
client; if that client cannot be reached the figure is reported as missing.

Import it as `import chat.eval as curation` (or from its modules): `from
chat import eval` would hide the builtin `eval`.
"""
from .judging import (
    SEARCH_TOOL_NAME,
    TOOL_NAME,
    ExpectationRecord,
    ScenarioObservation,
    ScenarioResult,
    TurnObservation,
    TurnRecord,
    judge,
    leaks_tool_text,
)
from .report import (
    DOC_INTRO,
    DOC_TITLE,
    HISTORY_HEADER,
    kind_rows,
    language_rows,
    markdown_grid,
    markdown_table,
    render_doc,
    report_rows,
    results_json,
    scenario_line,
    section_key,
    text_grid,
    text_table,
)
from .runner import USER_PREFIX, RequestProbe, Runner, accept_pending, delete_users, prompt_chars, run_suite
from .scenarios import (
    CHANGES,
    CONSOLIDATION_KIND,
    DEFAULT_LANGUAGE,
    GUARD,
    HALVES,
    HELD_OUT,
    KINDS,
    NONE,
    PEOPLE,
    RECALL_KIND,
    ROLES,
    SCENARIOS_PATH,
    TARGETS,
    TASK_PROGRESS_KIND,
    TUNING,
    WRITE,
    Expectation,
    Scenario,
    ScenarioError,
    Turn,
    load_scenarios,
    split_half,
)
from .scoring import COMMITTED, Figures, headline, percentile, score

__all__ = [
    "CHANGES",
    "COMMITTED",
    "CONSOLIDATION_KIND",
    "DEFAULT_LANGUAGE",
    "DOC_INTRO",
    "DOC_TITLE",
    "GUARD",
    "HALVES",
    "HELD_OUT",
    "HISTORY_HEADER",
    "KINDS",
    "NONE",
    "PEOPLE",
    "RECALL_KIND",
    "ROLES",
    "SCENARIOS_PATH",
    "SEARCH_TOOL_NAME",
    "TARGETS",
    "TASK_PROGRESS_KIND",
    "TOOL_NAME",
    "TUNING",
    "USER_PREFIX",
    "WRITE",
    "Expectation",
    "ExpectationRecord",
    "Figures",
    "RequestProbe",
    "Runner",
    "Scenario",
    "ScenarioError",
    "ScenarioObservation",
    "ScenarioResult",
    "Turn",
    "TurnObservation",
    "TurnRecord",
    "accept_pending",
    "delete_users",
    "headline",
    "judge",
    "kind_rows",
    "language_rows",
    "leaks_tool_text",
    "load_scenarios",
    "markdown_grid",
    "markdown_table",
    "percentile",
    "prompt_chars",
    "render_doc",
    "report_rows",
    "results_json",
    "run_suite",
    "scenario_line",
    "score",
    "section_key",
    "split_half",
    "text_grid",
    "text_table",
]
