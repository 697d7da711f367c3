"""Context blocks: tokens injected per session start and per prompt, and how often the needed record is in them.

The two sets of the recall benchmarks go through the product's spool → drain path in
process (benchdata.py, no model, embeddings off: the hook's recall is lexical):
  coding  the 40 agent turns of bench/data/coding_set.json among commit-message distractor
          turns (bench_coding.py's data), each asked back twice (ordinary and hard question)
  LoCoMo  every dialog turn of ../shared/bench/locomo (bench_locomo.py's data), its 1,540
          questions of categories 1-4 asked in their conversation's project
For each question, as a new session would see it: the session-start block of its project,
then the block for the question as that session's first prompt (what the start showed is
not shown again). Figures: tokens per block (Claude's tokenizer as litellm ships it, else
characters / 4), and how often the record the question needs (its turn; for LoCoMo any
evidence turn) is in the prompt block, and in the start and prompt blocks together.
Prints a table; never fails.

    python bench/bench_context.py [--distractors N] [--sets coding,locomo] [--limit-questions N]
"""

import argparse
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchdata import (  # noqa: E402
    LOCOMO_ZIP,
    coding_set,
    distractors,
    locomo_conversations,
    make_project,
)
from benchtable import pct, print_table  # noqa: E402

PROMPT_GOAL, START_GOAL = 300, 600  # tokens (issue #24)
MISSES = None  # --misses: the questions whose needed record is not in the prompt block


def token_counter():
    """(name, count(text)): the Anthropic tokenizer file litellm bundles, else characters / 4."""
    try:
        import importlib.util

        from tokenizers import Tokenizer

        spec = importlib.util.find_spec("litellm")  # its folder only: importing litellm costs seconds
        path = os.path.join(
            list(spec.submodule_search_locations)[0],
            "litellm_core_utils",
            "tokenizers",
            "anthropic_tokenizer.json",
        )
        tok = Tokenizer.from_file(path)
        return "Claude tokenizer (litellm's anthropic_tokenizer.json)", lambda text: len(tok.encode(text).ids)
    except Exception:  # noqa: BLE001 - any missing piece: the estimate the product itself uses
        return "characters / 4", lambda text: -(-len(text) // 4)


def _ingest_coding(tmp: str, n_distractors: "int | None"):
    from bench_coding import ingest

    data = coding_set()
    project = make_project(os.path.join(tmp, "app"))
    ingest(project, data["turns"], distractors(n_distractors))
    return project, data["turns"]


def _coding_questions(conn, project, turns):
    record_of = {}
    for rid, title in conn.execute("select record_id, title from memory_records"):
        flat = " ".join(title.split())
        for t in turns:
            if flat and " ".join(t["prompt"].split()).startswith(flat):
                record_of.setdefault(t["id"], rid)
    for t in turns:
        for kind in ("ordinary", "hard"):
            yield project, t[kind], {record_of.get(t["id"])} - {None}


def _ingest_locomo(tmp: str, convs):
    from bench_locomo import ingest

    return ingest(tmp, convs)


def _locomo_questions(conn, convs, projects, by_text, limit):
    from bench_locomo import dia_of_records, gold_turns

    dia = dia_of_records(conn, {k: list(v) for k, v in by_text.items()})
    records_of_dia: dict = {}
    for rid, d in dia.items():
        records_of_dia.setdefault(d, set()).add(rid)
    asked = 0
    for conv_id, _, qa in convs:
        for q in qa:
            gold = gold_turns(q)
            if not gold:
                continue
            asked += 1
            if limit and asked > limit:
                return
            yield projects[conv_id], q["question"], set().union(*(records_of_dia.get(g, set()) for g in gold))


def measure(conn, questions, count):
    """Per question: the session start of its project, then the question as the first prompt."""
    from kirolearn.recall import context

    conf = context.settings()
    starts: dict = {}
    start_tokens, prompt_tokens, in_prompt, in_either, empty, lines = [], [], 0, 0, 0, []
    n = 0
    for project, question, needed in questions:
        if project not in starts:
            text, ids = context.session_start(conn, project, conf=conf)
            starts[project] = (text, ids)
            start_tokens.append(count(text) if text else 0)
        start_text, start_ids = starts[project]
        text, ids = context.for_prompt(conn, project, question, already=start_ids, conf=conf)
        n += 1
        prompt_tokens.append(count(text) if text else 0)
        empty += not text
        lines.append(sum(1 for ln in text.splitlines() if ln.startswith(">")))
        in_prompt += bool(needed & set(ids))
        if MISSES is not None and not needed & set(ids):
            MISSES.append(question)
        in_either += bool(needed & (set(ids) | set(start_ids)))
    shown = [t for t in prompt_tokens if t]
    return {
        "n": n,
        "starts": len(start_tokens),
        "start_mean": statistics.mean(start_tokens or [0]),
        "start_max": max(start_tokens or [0]),
        "prompt_mean": statistics.mean(shown or [0]),
        "prompt_p95": pct(shown, 0.95) if shown else 0,
        "prompt_max": max(shown or [0]),
        "empty": empty,
        "in_prompt": in_prompt,
        "in_either": in_either,
        "lines": statistics.mean([x for x in lines if x] or [0]),
    }


def where_it_stops(name: str, m: dict) -> str:
    """One line on the goals (<= ~300 tokens a prompt block, <= ~600 a session start), from this run's figures."""
    said = []
    said.append(
        f"prompt blocks {'within' if m['prompt_p95'] <= PROMPT_GOAL * 1.05 else 'OVER'} ~{PROMPT_GOAL} "
        f"tokens at p95 ({m['prompt_p95']:.0f})"
    )
    said.append(
        f"session starts {'within' if m['start_max'] <= START_GOAL else 'OVER'} {START_GOAL} "
        f"({m['start_max']} at most)"
    )
    if not m["start_max"]:
        said.append(
            "no session start block: no record of this set is a turn summary or notable (all chatter "
            "or routine), so a new session is told nothing until its first prompt"
        )
    return f"{name}: " + "; ".join(said)


def rows_of(name, m):
    n = max(m["n"], 1)
    return [
        (
            f"{name}: session start tokens mean / max ({m['starts']} projects)",
            f"{m['start_mean']:.0f} / {m['start_max']}",
            f"<= {START_GOAL}",
        ),
        (
            f"{name}: prompt block tokens mean / p95 / max (non-empty)",
            f"{m['prompt_mean']:.0f} / {m['prompt_p95']:.0f} / {m['prompt_max']}",
            f"<= {PROMPT_GOAL}",
        ),
        (
            f"{name}: needed record in the prompt block",
            f"{m['in_prompt']}/{m['n']} = {m['in_prompt'] / n:.3f}",
            "at least as often as before",
        ),
        (
            f"{name}: ... in the session start or the prompt block",
            f"{m['in_either']}/{m['n']} = {m['in_either'] / n:.3f}",
            "",
        ),
        (f"{name}: prompts with no block / quoted lines per block", f"{m['empty']} / {m['lines']:.1f}", ""),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--distractors", type=int, default=0, help="coding distractor turns (default: all)")
    parser.add_argument("--sets", default="coding,locomo")
    parser.add_argument(
        "--limit-questions", type=int, default=0, help="LoCoMo: ask only the first N questions"
    )
    parser.add_argument("--zip", default=LOCOMO_ZIP)
    parser.add_argument(
        "--misses", action="store_true", help="list the questions whose record the block missed"
    )
    args = parser.parse_args()
    global MISSES
    MISSES = [] if args.misses else None
    os.environ["KIROLEARN_EMBEDDING_MODEL"] = "none"  # the hook's recall is lexical; vectors only cost time
    name, count = token_counter()
    tmp = tempfile.mkdtemp(prefix="kl-context-")
    rows, notes = [], [f"tokens: {name}"]
    from kirolearn.recall import lexical as recall

    if "coding" in args.sets:
        os.environ["KIROLEARN_HOME"] = os.path.join(tmp, "coding", "home")
        t0 = time.perf_counter()
        project, turns = _ingest_coding(os.path.join(tmp, "coding"), args.distractors or None)
        conn = recall.connect_readonly(budget=1e9)
        m = measure(conn, _coding_questions(conn, project, turns), count)
        conn.close()
        notes.append(
            f"coding: {len(turns)} turns, {args.distractors or 'all'} distractors, {m['n']} questions "
            f"({time.perf_counter() - t0:.0f} s)"
        )
        rows += rows_of("coding", m)
        notes.append(where_it_stops("coding", m))
    if "locomo" in args.sets and not os.path.exists(args.zip):
        notes.append(f"LoCoMo not found at {args.zip}: skipped")
    elif "locomo" in args.sets:
        os.environ["KIROLEARN_HOME"] = os.path.join(tmp, "locomo", "home")
        t0 = time.perf_counter()
        convs = locomo_conversations(args.zip)
        projects, by_text = _ingest_locomo(os.path.join(tmp, "locomo"), convs)
        conn = recall.connect_readonly(budget=1e9)
        m = measure(conn, _locomo_questions(conn, convs, projects, by_text, args.limit_questions), count)
        conn.close()
        notes.append(
            f"LoCoMo: {len(convs)} conversations, {m['n']} questions ({time.perf_counter() - t0:.0f} s)"
        )
        rows += rows_of("LoCoMo", m)
        notes.append(where_it_stops("LoCoMo", m))
    for question in MISSES or ():
        print("missed:", question)
    if rows:
        print_table("context blocks: tokens injected and the needed record (hook recall, no model)", rows)
    for note in notes:
        print(note)
    return 0


if __name__ == "__main__":
    sys.exit(main())
