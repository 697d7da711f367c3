"""The limits of hook recall, defined once below the two readers of `[recall]`.

kirolearn.core.configfile reads the table from config.toml with the standard library for the
hook (through kirolearn.recall.context); kirolearn.settings validates the same table with pydantic.
Both start from DEFAULTS and cap the budget at MAX_BUDGET_TOKENS. Standard library only, no imports.

A prompt's block is at most budget_tokens (estimated at 4 characters a token), a session start's
twice that. 270 estimated is ~300 tokens of Claude's tokenizer on code-heavy memory (ids and
punctuation cost more than 4 characters a token): bench/bench_context.py.

Kiro CLI (like Q CLI) cuts hook output at max_output_size, 10,240 bytes by default: the budget is
capped below it (2,400 tokens ≈ 9,600 characters) and the block below 10,000 bytes.
"""

# ~300 real tokens on code-heavy memory (bench/bench_context.py)
DEFAULT_BUDGET_TOKENS = 270
DEFAULT_TIME_BUDGET = 0.25  # seconds for one recall inside a hook
DEFAULTS = {
    "budget_tokens": DEFAULT_BUDGET_TOKENS,
    "prompt_records": 5,
    "session_start_records": 3,
    "time_budget_ms": int(DEFAULT_TIME_BUDGET * 1000),
}
# below Kiro CLI's 10,240-byte cut of hook output (see the module docstring)
MAX_BUDGET_TOKENS = 2400
