"""Issue #31 ("Memory that stays true"): score one half of a generated project history.

Runs bench/history.py for a half (a real git repository, the agent turns through the real
`kirolearn-hook`, `kirolearn drain` after each day, the user deleting, renaming and rewriting files),
then reads what kirolearn made of it ONLY through the CLI's JSON:
  kirolearn export                (JSON Lines; "type": "event" and "type": "record" lines)
  kirolearn list --json           (records of the project)
  kirolearn search QUERY --json   (one query per changed setting)
  kirolearn consolidate --json    (preview groups), then `consolidate --apply --json`, then export and
                                  list again (an absent command prints n/a)
The record fields issue #31 adds are `freshness` (current | changed | deleted), `outcome` (failed |
succeeded | unknown), `superseded_by` and `merged_into` (a record id or null); a field no output
carries prints "n/a" and its figure is not computed.

How records are matched to the turns of the truth: every turn's prompt is unique in the run. The
prompt's event is found in the export (an "event" line of kind "prompt" with exactly that text);
the record whose `source_event_ids` holds that event id is the turn's record. A record no event id
matches falls back to its title (the deterministic extractor titles a record with its prompt) in the
turn's session. Several records of one turn (a model extractor) all belong to it; the first stored is
its primary record, the one scored.

Figures (goals from issue #31): the newest record ranked above each older one for a query about a
changed setting (100 %); `superseded_by` of each older record naming a later record of its chain
(>= 90 %); a failed attempt superseded by a later success of the same command (>= 90 %; a different
failed work beside it, never retried, superseded by nothing); freshness right for deleted and rewritten files (>= 95 %); false `changed` on untouched or
trivially touched files (0); renames followed (current); `outcome` failed right (>= 95 %); `failed`
on a turn that succeeded (0); duplicate chores merged (>= 80 %: each group's records sharing one
survivor); wrong merges (0: a record merged into one of another turn, chore or near miss); and the
CPU seconds of the postToolUse hook and of the drain passes (wait4 of each process).

    python bench/bench_truth.py [--half tune|heldout] [--seed 1] [--scenarios 60] [--json] [--misses]
                                [--bin DIR] [--keep DIR] [--jobs 3]
"""

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import history  # noqa: E402
from benchtable import pct, print_table  # noqa: E402

NEW_FIELDS = ("freshness", "outcome", "superseded_by", "merged_into")
NA = "n/a"


def norm(text) -> str:
    return " ".join(str(text or "").split())


# --- reading kirolearn through its CLI ------------------------------------------------------------


class Reader:
    """Everything the scorer knows about kirolearn's records, from the CLI's JSON only."""

    def __init__(self, runner):
        self.runner = runner
        self.notes = []

    def cli(self, *args, label=None):
        return self.runner.cli_json(*args, label=label)

    def export(self):
        code, out = self.cli("export", label="cli export")
        events, records = [], []
        for line in out.splitlines():
            line = line.strip()
            if not line.startswith("{"):
                continue
            try:
                item = json.loads(line)
            except ValueError:
                continue
            if item.get("type") == "event":
                events.append(item)
            elif item.get("type") == "record":
                records.append(item)
        if code != 0:
            self.notes.append(f"`kirolearn export` exited {code}")
        return events, records

    def listed(self):
        code, out = self.cli("list", "--json", "--limit", "10000", label="cli list")
        try:
            data = json.loads(out)
        except ValueError:
            self.notes.append(f"`kirolearn list --json` printed no JSON (exit {code})")
            return []
        if isinstance(data, dict):  # tolerate {"records": [...]}
            data = data.get("records", [])
        return [r for r in data if isinstance(r, dict)]

    def search(self, queries, attempts: int = 3):
        """{query: hits, or None when every attempt failed}. One at a time: measured on a busy 2-core
        machine, four searches at once all ended in "database ... failed: interrupted" (the CLI gives its
        read connection a 5 s budget), so a failed one is retried, and reported when it never succeeds."""
        found = {}
        for query in queries:
            found[query] = None
            for _ in range(attempts):
                code, out = self.cli("search", query, "--json", "--limit", "20", label="cli search")
                try:
                    data = json.loads(out)
                except ValueError:
                    continue
                if isinstance(data, dict):
                    data = data.get("results") or data.get("hits") or data.get("records") or []
                found[query] = [h for h in data if isinstance(h, dict)]
                break
            if found[query] is None:
                self.notes.append(
                    f"`kirolearn search {query!r} --json` failed {attempts} times "
                    f"(exit {code}): "
                    f"{out.strip()[-160:]}"
                )
        return found

    def consolidate(self, apply: bool):
        """The command's JSON, or None when the command does not exist (or printed no JSON)."""
        args = ["consolidate", "--json"] + (["--apply"] if apply else [])
        code, out = self.cli(*args, label="cli consolidate" + (" --apply" if apply else ""))
        if "No such command" in out:
            return None
        try:
            return json.loads(out)
        except ValueError:
            start = out.find("{")
            try:
                return json.loads(out[start:]) if start >= 0 else None
            except ValueError:
                self.notes.append(
                    f"`kirolearn {' '.join(args)}` exited {code} without JSON: {out.strip()[-200:]}"
                )
                return None


def field(sources, rid, name):
    """(present, value) of a record field: the first record view (list, export, search hits) that has it."""
    for view in sources:
        record = view.get(rid)
        if record is not None and name in record:
            return True, record[name]
    return False, None


# --- matching records to turns --------------------------------------------------------------------


def match(truth, events, records):
    """{turn key: [record ids, oldest first]}, {record id: turn key}, and how each was matched."""
    prompt_events = {}
    for event in events:
        if event.get("kind") == "prompt" and event.get("prompt"):
            prompt_events.setdefault(norm(event["prompt"]), []).append(event["event_id"])
    turn_of_event = {}
    for turn in truth["turns"]:
        for event_id in prompt_events.get(norm(turn["prompt"]), []):
            turn_of_event[event_id] = turn["key"]
    by_turn, turn_of, how = {}, {}, {"event id": 0, "title": 0, "unmatched": 0}
    ordered = sorted(records, key=lambda r: (str(r.get("created_at", "")), r.get("record_id", "")))
    by_title = {}
    for turn in truth["turns"]:
        by_title[norm(turn["prompt"])] = turn
    for record in ordered:
        rid = record.get("record_id")
        sources = record.get("source_event_ids") or ()
        key = next((turn_of_event[e] for e in sources if e in turn_of_event), None)
        if key:
            how["event id"] += 1
        else:
            turn = by_title.get(norm(record.get("title")))
            if turn is not None and (turn.get("session_id") in (None, record.get("session_id"))):
                key = turn["key"]
                how["title"] += 1
        if key is None:
            how["unmatched"] += 1
            continue
        by_turn.setdefault(key, []).append(rid)
        turn_of[rid] = key
    how["turns without a record"] = sum(1 for t in truth["turns"] if t["key"] not in by_turn)
    return by_turn, turn_of, how


# --- figures --------------------------------------------------------------------------------------


class Figure:
    """A ratio or a count with its misses; n/a when the field it needs is absent everywhere."""

    def __init__(self, name, goal, kind="ratio"):
        self.name, self.goal, self.kind = name, goal, kind
        self.hits = self.total = 0
        self.available = True
        self.misses = []

    def add(self, ok: bool, miss=None):
        self.total += 1
        self.hits += bool(ok)
        if not ok and miss is not None:
            self.misses.append(miss)

    def count(self, bad: bool, miss=None):  # for "0" goals: hits counts the bad ones
        self.total += 1
        if bad:
            self.hits += 1
            if miss is not None:
                self.misses.append(miss)

    def value(self) -> str:
        if not self.available:
            return NA
        if self.kind == "count":
            return f"{self.hits} of {self.total}"
        if not self.total:
            return "none"
        return f"{100.0 * self.hits / self.total:.0f}% ({self.hits}/{self.total})"

    def as_json(self):
        return {
            "figure": self.name,
            "goal": self.goal,
            "available": self.available,
            "hits": self.hits,
            "total": self.total,
            "value": self.value(),
            "misses": self.misses,
        }


def score(truth, reader):
    events, exported = reader.export()
    listed = reader.listed()
    by_turn, turn_of, how = match(truth, events, exported)
    primary = {key: ids[0] for key, ids in by_turn.items()}
    export_view = {r["record_id"]: r for r in exported if "record_id" in r}
    list_view = {r["record_id"]: r for r in listed if "record_id" in r}
    scenarios = {s["index"]: s for s in truth["scenarios"]}
    turns = {t["key"]: t for t in truth["turns"]}

    # a. changed facts: ranking (search) and supersede
    facts = [s for s in truth["scenarios"] if s["family"] == "changed_fact"]
    hits_of = reader.search([s["truth"]["query"] for s in facts])
    search_view = {}
    for hits in hits_of.values():
        for h in hits or ():
            search_view.setdefault(h.get("record_id"), h)
    views = (list_view, export_view, search_view)
    present = {name: any(name in v for view in views for v in view.values()) for name in NEW_FIELDS}

    ranked = Figure("newer ranked above older (changed facts)", "100%")
    superseded = Figure("superseded_by set (older -> a later record)", ">= 90%")
    wrong_super = Figure("superseded_by set where it should not be", "0", "count")
    chain_ids = {}
    for s in facts:
        chain = [primary.get(k) for k in s["truth"]["chain"]]
        newest = chain[-1]
        found = hits_of.get(s["truth"]["query"])
        hits = [h.get("record_id") for h in found or []]
        for j, older in enumerate(chain[:-1]):
            where = {
                "scenario": s["index"],
                "setting": s["truth"]["setting"],
                "query": s["truth"]["query"],
                "older": older,
                "newest": newest,
            }
            if older is None or newest is None:
                ranked.add(False, {**where, "why": "a turn has no record"})
                superseded.add(False, {**where, "why": "a turn has no record"})
                continue
            chain_ids[older] = set(c for c in chain[j + 1 :] if c)
            if found is None:
                ranked.add(False, {**where, "why": "the search failed (see the notes)"})
            else:
                ok = newest in hits and (older not in hits or hits.index(newest) < hits.index(older))
                ranked.add(
                    ok,
                    {
                        **where,
                        "rank_newest": hits.index(newest) + 1 if newest in hits else None,
                        "rank_older": hits.index(older) + 1 if older in hits else None,
                    },
                )
            has, value = field(views, older, "superseded_by")
            superseded.add(has and value in chain_ids[older], {**where, "superseded_by": value})
    # a later success of the failed command supersedes the failed attempt (its other commands never do)
    retried = Figure("failed attempt superseded by its later success", ">= 90%")
    pairs = []
    for s in truth["scenarios"]:
        if s["family"] == "outcome" and "retried" in s["truth"]["turns"]:
            pairs.append((s, {v: s["truth"]["turns"][v] for v in ("failed", "retried")}))
        elif s["family"] == "retry":  # its controls, failed too and never retried, must stay unsuperseded
            pairs += [(s, pair) for pair in s["truth"]["pairs"]]
    for s, pair in pairs:
        old, new = primary.get(pair["failed"]), primary.get(pair["retried"])
        where = {
            "scenario": s["index"],
            "shape": s["truth"]["shape"],
            "failed": old,
            "retried": new,
            "agents": [turns[pair[v]]["agent"] for v in ("failed", "retried")],
        }
        if old is None or new is None:
            retried.add(False, {**where, "why": "a turn has no record"})
            continue
        chain_ids[old] = {new}
        has, value = field(views, old, "superseded_by")
        retried.add(has and value == new, {**where, "superseded_by": value})
    retried.available = present["superseded_by"]
    superseded.available = present["superseded_by"]
    wrong_super.available = present["superseded_by"]
    if present["superseded_by"]:
        for rid in export_view:
            has, value = field(views, rid, "superseded_by")
            bad = bool(has and value) and value not in chain_ids.get(rid, ())
            wrong_super.count(bad, {"record": rid, "turn": turn_of.get(rid), "superseded_by": value})

    # b, c. freshness
    fresh = Figure("freshness right: deleted + rewritten files", ">= 95%")
    false_changed = Figure("false `changed` on untouched / trivially touched files", "0", "count")
    renamed = Figure("renamed files (git mv) kept current", "100%")
    nofile_stale = Figure("records touching no file not `current`", "0", "count")
    for f in (fresh, false_changed, renamed, nofile_stale):
        f.available = present["freshness"]
    details_fresh = {}
    if present["freshness"]:
        items = []
        for s in truth["scenarios"]:
            if s["family"] == "file_fate":
                items.append({k: s["truth"][k] for k in ("turn", "action", "expect", "path")})
            elif s["family"] == "rewrite":
                items += s["truth"]["items"]
        for item in items:
            rid = primary.get(item["turn"])
            has, value = field(views, rid, "freshness") if rid else (False, None)
            miss = {**item, "record": rid, "freshness": value}
            details_fresh.setdefault(item["action"], {}).setdefault(str(value), 0)
            details_fresh[item["action"]][str(value)] += 1
            if item["action"] == "git-mv":
                renamed.add(value == "current", miss)
            elif item["expect"] in ("deleted", "changed"):
                fresh.add(value == item["expect"], miss)
            else:
                false_changed.count(value == "changed", miss)
        for key, rid in primary.items():
            turn = turns[key]
            if scenarios[turn["scenario"]]["family"] in ("outcome", "chore") and not any(
                t["op"] in ("write", "edit") for t in turn["tools"]
            ):
                has, value = field(views, rid, "freshness")
                nofile_stale.count(
                    has and value != "current", {"turn": key, "record": rid, "freshness": value}
                )

    # d. outcomes
    failed_right = Figure("outcome `failed` right", ">= 95%")
    failed_on_success = Figure("outcome `failed` on a turn that succeeded", "0", "count")
    succeeded_right = Figure("outcome `succeeded` right (recovered + plain)", "-")
    for f in (failed_right, failed_on_success, succeeded_right):
        f.available = present["outcome"]
    per_shape = {}
    if present["outcome"]:
        for turn in truth["turns"]:
            rid = primary.get(turn["key"])
            has, value = field(views, rid, "outcome") if rid else (False, None)
            expect = turn["expect"]["outcome"]
            shape = turn["expect"].get("shape")
            miss = {
                "turn": turn["key"],
                "agent": turn["agent"],
                "shape": shape,
                "variant": turn["expect"].get("variant"),
                "record": rid,
                "outcome": value,
            }
            if shape:
                per_shape.setdefault(shape, {}).setdefault(turn["expect"]["variant"], []).append(value)
            if expect == "failed":
                failed_right.add(value == "failed", miss)
            else:
                failed_on_success.count(value == "failed", miss)
                if shape:
                    succeeded_right.add(value == "succeeded", miss)

    # e. consolidation (after the ranking queries: merging changes what search returns)
    preview = reader.consolidate(apply=False)
    applied = reader.consolidate(apply=True) if preview is not None else None
    if applied is not None:
        events, exported = reader.export()
        listed = reader.listed()
        export_view = {r["record_id"]: r for r in exported if "record_id" in r}
        list_view = {r["record_id"]: r for r in listed if "record_id" in r}
        views = (list_view, export_view, search_view)
    merged_present = any("merged_into" in v for view in (list_view, export_view) for v in view.values())
    edges, merge_source = {}, None
    if merged_present:
        merge_source = "merged_into" + (
            " after `consolidate --apply`" if applied is not None else " (drain only)"
        )
        for rid in export_view:
            has, value = field((list_view, export_view), rid, "merged_into")
            if has and value:
                edges[rid] = value
    elif isinstance(preview, dict) and isinstance(preview.get("groups"), list):
        merge_source = "`consolidate --json` preview groups (no merged_into field)"
        for group in preview["groups"]:
            into = group.get("into")
            for rid in group.get("record_ids") or ():
                if rid != into:
                    edges[rid] = into

    def root(rid):
        seen = set()
        while rid in edges and rid not in seen:
            seen.add(rid)
            rid = edges[rid]
        return rid

    merged = Figure("duplicate chores merged", ">= 80%")
    wrong_merge = Figure("wrong merges (other turn, chore or near miss)", "0", "count")
    merged.available = wrong_merge.available = merge_source is not None
    if merge_source:
        for s in truth["scenarios"]:
            if s["family"] != "chore":
                continue
            ids = [primary[k] for k in s["truth"]["group"] if k in primary]
            roots = {}
            for rid in ids:
                roots.setdefault(root(rid), []).append(rid)
            best = max((len(v) for v in roots.values()), default=0)
            merged.total += max(0, len(ids) - 1)  # k records of one chore: k - 1 merges to make
            merged.hits += max(0, best - 1)  # made: the records sharing the most common survivor, but one
            if best < len(ids):
                merged.misses.append(
                    {
                        "scenario": s["index"],
                        "chore": s["truth"]["chore"],
                        "records": ids,
                        "survivors": sorted(map(str, roots)),
                    }
                )

        def unit(rid):
            key = turn_of.get(rid)
            return turns[key]["expect"]["unit"] if key else "record:" + str(rid)

        for rid in export_view:
            if rid in edges:
                bad = unit(rid) != unit(root(rid))
                wrong_merge.count(
                    bad,
                    {
                        "record": rid,
                        "turn": turn_of.get(rid),
                        "into": root(rid),
                        "into_turn": turn_of.get(root(rid)),
                    },
                )
            else:
                wrong_merge.total += 1

    figures = [
        ranked,
        superseded,
        retried,
        wrong_super,
        fresh,
        false_changed,
        renamed,
        nofile_stale,
        failed_right,
        failed_on_success,
        succeeded_right,
        merged,
        wrong_merge,
    ]
    return {
        "figures": figures,
        "matching": how,
        "present": present,
        "merge_source": merge_source,
        "consolidate": "n/a (no such command)" if preview is None else "ran",
        "per_shape": per_shape,
        "freshness_by_action": details_fresh,
        "records": len(export_view),
        "notes": reader.notes,
    }


def costs(runner):
    """CPU seconds of each kind of process (user + system, from wait4), and wall seconds."""
    out = {}
    for label, values in sorted(runner.costs.items()):
        cpu = [c for c, _ in values]
        out[label] = {
            "n": len(cpu),
            "cpu_median_s": statistics.median(cpu),
            "cpu_p90_s": pct(cpu, 0.9),
            "cpu_total_s": sum(cpu),
            "wall_median_s": statistics.median([w for _, w in values]),
        }
    return out


def cost_rows(c: dict) -> list:
    def ms(label, key="cpu_median_s"):
        return f"{c[label][key] * 1000:.0f} ms" if label in c else NA

    def sec(label, key="cpu_median_s"):
        return f"{c[label][key]:.2f} s" if label in c else NA

    drains = sum(v["cpu_total_s"] for k, v in c.items() if k.startswith("drain"))
    return [
        (
            "hook postToolUse CPU, median (p90)",
            f"{ms('hook postToolUse')} ({ms('hook postToolUse', 'cpu_p90_s')})",
            "no slower than before",
        ),
        ("hook userPromptSubmit CPU, median", ms("hook userPromptSubmit"), "-"),
        ("drain pass with new turns CPU, median", sec("drain"), "bounded"),
        ("drain pass with nothing new CPU, median", sec("drain (idle)"), "bounded"),
        ("drain CPU, all passes", f"{drains:.1f} s", "-"),
    ]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--half", choices=history.HALVES, default="tune")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--scenarios", type=int, default=history.SCENARIOS, help="scenarios per half (default %(default)s)"
    )
    parser.add_argument("--days", type=int, default=history.DAYS)
    parser.add_argument(
        "--bin",
        default=os.environ.get("KIROLEARN_BENCH_BIN", history.DEFAULT_BIN),
        help="folder with the kirolearn and kirolearn-hook scripts (default %(default)s)",
    )
    parser.add_argument("--jobs", type=int, default=3, help="sessions of one day played at once (default 3)")
    parser.add_argument(
        "--keep", metavar="DIR", help="build in DIR and keep it (default: a temp folder, removed)"
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument(
        "--misses", action="store_true", help="also print every miss (the tune half only, please)"
    )
    args = parser.parse_args(argv)

    started = time.perf_counter()
    workdir = args.keep or tempfile.mkdtemp(prefix=f"kirolearn-truth-{args.half}-")
    if args.keep and os.path.exists(os.path.join(workdir, "repo")):
        raise SystemExit(f"{workdir} already holds a run; pass an empty or new folder")
    try:
        truth, runner = history.build(
            args.half, args.seed, args.scenarios, workdir, args.bin, jobs=args.jobs, days=args.days
        )
        reading = time.perf_counter()
        result = score(truth, Reader(runner))
        result["costs"] = costs(runner)
        truth["played"]["phases"]["reading"] = round(time.perf_counter() - reading, 1)
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    seconds = time.perf_counter() - started
    played = truth["played"]
    summary = {
        "half": args.half,
        "seed": args.seed,
        "scenarios": len(truth["scenarios"]),
        "turns": len(truth["turns"]),
        "records": result["records"],
        "hook_calls": played["hook_calls"],
        "hook_errors": len(played["hook_errors"]),
        "commits": played["commits"],
        "seconds": round(seconds, 1),
        "phases_seconds": played["phases"],
        "matching": result["matching"],
        "fields_present": result["present"],
        "consolidate": result["consolidate"],
        "merge_source": result["merge_source"],
        "notes": result["notes"],
    }
    if args.json:
        print(
            json.dumps(
                {
                    **summary,
                    "figures": [f.as_json() for f in result["figures"]],
                    "cost_rows": [
                        {"figure": n, "value": v, "goal": g} for n, v, g in cost_rows(result["costs"])
                    ],
                    "outcome_by_shape": result["per_shape"],
                    "freshness_by_action": result["freshness_by_action"],
                    "costs": result["costs"],
                    "drains": played["drains"],
                },
                indent=1,
                default=str,
            )
        )
        return 0
    rows = [(f.name, f.value(), f.goal) for f in result["figures"]] + cost_rows(result["costs"])
    print_table(
        f"issue 31, memory that stays true: half {args.half}, seed {args.seed}, "
        f"{summary['scenarios']} scenarios, {summary['turns']} turns, {summary['records']} records, "
        f"{played['hook_calls']} hook calls, {played['commits']} commits, {seconds:.0f} s",
        rows,
    )
    m = result["matching"]
    print(
        f"matching: a turn's prompt event (its exact text, in `kirolearn export`) in a record's "
        f"source_event_ids: "
        f"{m['event id']} records; by title in the turn's session: {m['title']}; unmatched records: "
        f"{m['unmatched']}; turns without a record: {m['turns without a record']}"
    )
    absent = [k for k, v in result["present"].items() if not v]
    if absent:
        print(f"fields absent from every CLI output (their figures n/a): {', '.join(absent)}")
    merges = f"; merges read from {result['merge_source']}" if result["merge_source"] else ""
    print(f"consolidate: {result['consolidate']}{merges}")
    print("seconds: " + ", ".join(f"{k} {v}" for k, v in played["phases"].items()))
    if result["per_shape"]:
        print("outcome by failure shape (failed / recovered / succeeded turns):")
        for shape, variants in sorted(result["per_shape"].items()):
            print(
                f"  {shape:30} "
                + " / ".join(
                    ",".join(map(str, variants.get(v, []))) for v in ("failed", "recovered", "succeeded")
                )
            )
    if result["freshness_by_action"]:
        print(
            "freshness by user action: "
            + "; ".join(f"{a}: {v}" for a, v in sorted(result["freshness_by_action"].items()))
        )
    if played["hook_errors"]:
        print(
            f"hook calls that reported errors: {len(played['hook_errors'])}, "
            f"first: {played['hook_errors'][0]}"
        )
    failed_drains = [d for d in played["drains"] if d.get("status")]
    if failed_drains:
        print(f"drains that exited non-zero: {len(failed_drains)}, first: {failed_drains[0]}")
    for note in result["notes"]:
        print("note: " + note)
    if args.misses:
        for f in result["figures"]:
            for miss in f.misses if f.available else ():
                print(f"miss [{f.name}]: {json.dumps(miss, default=str)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
