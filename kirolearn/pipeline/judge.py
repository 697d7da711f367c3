"""A model's word on supersede pairs the rules left undecided (issues #31 and #36).

`truth.supersede_reason` decides without a model: the same identifier given a new value. A newer
record can also replace an older one in words no rule reads ("the nightly job now runs on the
worker, not cron"). With `[extract] model` set and `[drain] supersede_model_calls` above 0, the
drain asks the model about those pairs: at most that many calls a pass, within the daily spend
limit, each call bounded by `[extract] timeout_seconds`. Each call is a run row (reason
`supersede`), so `status` and the spend limit count it.

Precision first: only a validated answer of `true` marks the older record. An error, a timeout,
an answer that is not the schema's JSON, or `false` leaves both records as they were. A supersede
is a mark, never a removal (rule 14 in docs/architecture.md): `kirolearn restore` undoes it.
"""

from pydantic import BaseModel, Field, ValidationError

from kirolearn.core.ids import new_ulid
from kirolearn.pipeline import extract
from kirolearn.store.sqlite import db as store

PROMPT_VERSION = "supersede-1"
SYSTEM = (
    "You compare two notes an AI coding agent kept about one software project. Decide whether the NEWER "
    "note replaces what the OLDER note states: both are about the same setting, value, file, command or "
    "decision, and the newer one makes the older one wrong or out of date. Answer false when they are "
    "about different things, when the newer one only adds to the older, or when you are unsure. "
    'Answer with JSON only: {"supersedes": true or false, "why": "at most 15 words"}.'
)
NOTE_CHARS = 600  # each note's text sent: title, summary and facts, cut


class Verdict(BaseModel):
    supersedes: bool
    why: str = Field("", max_length=300)


def note(record: dict) -> str:
    """A record as the model reads it: its date, title, summary and facts, cut to NOTE_CHARS."""
    facts = "; ".join(str(f) for f in (record.get("facts") or []))
    text = " ".join(filter(None, [record.get("title") or "", record.get("summary") or "", facts]))
    return f"({(record.get('created_at') or '')[:10]}) {text[:NOTE_CHARS]}"


def messages(new: dict, old: dict) -> "list[dict]":
    return [{"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"OLDER: {note(old)}\n\nNEWER: {note(new)}"}]


class Judge:
    """Asks the model about (new, old) pairs, `calls` times at most; `judge(new, old)` is a reason or None."""

    def __init__(self, db, settings, complete=None, calls: "int | None" = None, scrub=None):
        self.db, self.settings, self.scrub = db, settings, scrub or (lambda text: text)
        self.complete = complete or extract.litellm_complete
        self.left = settings.drain.supersede_model_calls if calls is None else calls
        self.asked = 0
        self.errors: "list[str]" = []

    @classmethod
    def configured(cls, db, settings, complete=None, scrub=None) -> "Judge | None":
        """A judge when a model is set and the drain may ask it; None otherwise."""
        if not settings.extract.model or settings.drain.supersede_model_calls <= 0:
            return None
        return cls(db, settings, complete, scrub=scrub)

    def __call__(self, new: dict, old: dict) -> "str | None":
        if self.left <= 0:
            return None
        spent = store.daily_limit_reached(self.db, self.settings.extract)
        if spent:
            self.left = 0
            self.errors.append(spent)
            return None
        self.left -= 1
        self.asked += 1
        sent = messages(new, old)
        run = {"run_id": new_ulid(), "batch_key": f"supersede:{old['record_id']}", "extractor": "llm",
               "reason": "supersede", "model": self.settings.extract.model, "project_id": new.get("project_id"),
               "session_id": new.get("session_id"), "event_count": 0, "request": sent[1]["content"],
               "records_written": 0, "started_at": store.now_iso(), "fallback_reason": "",
               "prompt_version": PROMPT_VERSION}
        if self.complete is extract.litellm_complete:
            extract.load_litellm()  # seconds, once: not out of the call's time
        verdict, error = None, ""
        try:
            completion = extract.call_bounded(self.complete, sent, self.settings, self.settings.extract.timeout_seconds,
                                              response_format=Verdict)
        except Exception as exc:  # any provider failure: no mark
            completion, error = None, f"{type(exc).__name__}: {str(exc)[:200]}"
        if completion is not None:
            run.update(prompt_tokens=completion.prompt_tokens, completion_tokens=completion.completion_tokens,
                       cost_usd=completion.cost_usd, response_form=completion.form,
                       answer=self.scrub(completion.content or "")[:extract.ANSWER_KEPT_CHARS])
            try:
                verdict = Verdict.model_validate_json(extract.unfenced(completion.content))
            except ValidationError as exc:
                error = f"answer is not the verdict's JSON: {str(exc).splitlines()[0][:160]}"
        if error:
            self.errors.append(error)
        run.update(outcome="ok" if verdict is not None else "failed", error=error, finished_at=store.now_iso())
        self._keep(run)
        if verdict is None or not verdict.supersedes:
            return None
        return "model: " + (" ".join(verdict.why.split())[:200] or "the newer note replaces it")

    def _keep(self, run: dict) -> None:
        with store.writing(self.db):
            store.insert_run(self.db, run)
