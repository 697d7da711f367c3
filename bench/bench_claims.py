"""Score kirolearn's memory marks on worlds built by bench/claims_world.py (a generator independent of
bench_truth's): real repositories, four agents' payloads through the real hook, the person's own moves,
formatter runs, reverts and branch switches, `kirolearn drain` between phases.

What kirolearn made of a world is read only through its CLI: `list --json` (marks, claims, cites),
`search Q --json` (ranking), `consolidate --json` (preview, then `--apply`), `restore`, `show --json`
(the history that names a wrong mark's evidence). The truth comes from the world, which built it.

Figures:
- false marks: a record the truth says is live and current found superseded, merged or
  `changed` / `deleted`, out of every such check (goal 0);
- changed settings superseded (the older record's `superseded_by` names the newer): goal >= 90 %;
- newer record ranked first in `search <setting>` among the two: goal 100 %;
- echo ranked above the record it cites: violations (goal 0); echo cites its source: %;
- identical chores merged into one survivor, and identical echo questions folded: goal >= 90 %;
- look-alike chores (other targets) merged with each other or the repeated chore: count (goal 0);
- true record in the top 5 after talk, a hypothetical, a failed and a discarded attempt: %;
- restores that last: a restored record unmarked after another drain and `consolidate --apply`.

    python bench/bench_claims.py [--half tune|heldout|fresh] [--quick] [--per-kind 8] [--bin .venv/bin]
                                 [--jobs 2] [--keep DIR] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import claims_world  # noqa: E402
from benchtable import print_table  # noqa: E402

STEM = {"superseded_by": "supersede", "merged_into": "merge", "freshness": "freshness"}
DEFAULT_BIN = os.path.join(os.path.dirname(HERE), ".venv", "bin")


def say(msg: str) -> None:
    print(f"[bench_claims] {msg}", file=sys.stderr, flush=True)


class Tally:
    """Hits out of checks, with the failing cases kept."""

    def __init__(self):
        self.hits, self.total, self.cases = 0, 0, []

    def add(self, ok: bool, case=None):
        self.total += 1
        self.hits += bool(ok)
        if not ok and case is not None:
            self.cases.append(case)

    def pct(self) -> str:
        return f"{100 * self.hits / self.total:.0f}% ({self.hits}/{self.total})" if self.total else "n/a"


class Reading:
    """kirolearn's records of the world, from `list --json`, keyed by (project root, session)."""

    def __init__(self, world):
        self.world = world
        found = world.cli_json("list", "--all-projects", "--limit", "10000") or []
        found = found.get("records", []) if isinstance(found, dict) else found
        self.by_id = {r["record_id"]: r for r in found}
        self.by_session: dict = {}
        for r in sorted(found, key=lambda r: (r.get("created_at") or "", r["record_id"])):
            self.by_session.setdefault((os.path.normpath(r.get("project_root") or ""), r["session_id"]), r)

    def record(self, sc, label):
        turn = sc.turns[label]
        return self.by_session.get((os.path.normpath(sc.project.root), turn.session))

    def root(self, rec):
        """The live record a merge chain ends in."""
        seen = set()
        while rec and rec.get("merged_into") and rec["record_id"] not in seen:
            seen.add(rec["record_id"])
            rec = self.by_id.get(rec["merged_into"], rec)
        return rec


def search_ids(world, sc, query):
    found = world.cli_json("search", query, "--project", sc.project.root, "--limit", "20")
    found = found.get("results", found) if isinstance(found, dict) else (found or [])
    return [h.get("record_id") for h in found if isinstance(h, dict)]


def mark_reason(world, record_id, mark):
    """The history row that set a mark (its reason names the evidence), from `show --json`."""
    shown = world.cli_json("show", record_id)
    if not shown:
        return "?"
    rows = [h for h in shown.get("history") or () if h.get("action") == mark]
    reason = (rows[-1].get("reason") if rows else "") or ""
    if mark == "freshness":
        reason = "; ".join(
            f"{c.get('file')} {c.get('key')}: {c.get('state')} (now {c.get('now')}) {c.get('why') or ''}"
            for c in shown.get("claims") or ()
            if c.get("state") not in (None, "current")
        )
    return reason or "(no reason recorded)"


def score(world, early: dict, reading: Reading, searches: dict):
    false = Tally()
    superseded, newer, cites, top = Tally(), Tally(), Tally(), Tally()
    echo_above, chores_merged, echo_folded = Tally(), Tally(), Tally()
    lookalike_merged, claimless, changed_listed = Tally(), Tally(), Tally()
    missing = []

    def clean(sc, label, marks=("superseded_by", "merged_into", "freshness")):
        rec = reading.record(sc, label)
        if rec is None:
            missing.append((sc.name, label))
            return
        for mark in marks:
            if mark == "freshness":
                bad = rec.get("freshness") not in ("current", None)
            else:
                bad = bool(rec.get(mark))
            false.add(not bad, (sc.name, label, rec["record_id"], mark, rec.get(mark)))

    for sc in world.scenarios:
        for check in sc.expect:
            what = check[0]
            if what == "unmarked":
                clean(sc, check[1])
            elif what == "not_merged":
                clean(sc, check[1], ("merged_into",))
            elif what == "superseded":
                old, new = reading.record(sc, check[1]), reading.record(sc, check[2])
                ok = bool(old and new and old.get("superseded_by") == new["record_id"])
                superseded.add(
                    ok,
                    (
                        sc.name,
                        check[1],
                        old and old["record_id"],
                        "superseded_by",
                        old and old.get("superseded_by"),
                    ),
                )
            elif what == "newer_first":
                query, new_label, old_label = check[1], check[2], check[3]
                ids = searches.get((sc.name, query, 3), [])
                new, old = reading.record(sc, new_label), reading.record(sc, old_label)
                ok = bool(new and new["record_id"] in ids) and (
                    old is None
                    or old["record_id"] not in ids
                    or ids.index(new["record_id"]) < ids.index(old["record_id"])
                )
                newer.add(
                    ok, (sc.name, new_label, new and new["record_id"], "search rank", f"{query}: {ids[:5]}")
                )
            elif what == "top":
                query, label, k = check[1], check[2], check[3]
                ids = searches.get((sc.name, query, 3), [])
                rec = reading.record(sc, label)
                top.add(
                    bool(rec and rec["record_id"] in ids[:k]),
                    (sc.name, label, rec and rec["record_id"], "top 5", f"{query}: {ids[:5]}"),
                )
            elif what == "cites":
                src = reading.record(sc, check[2])
                for label in check[1]:
                    rec = reading.record(sc, label)
                    ok = bool(
                        rec and src and rec.get("cites") == [src["record_id"]] and not rec.get("claims")
                    )
                    cites.add(
                        ok, (sc.name, label, rec and rec["record_id"], "cites", rec and rec.get("cites"))
                    )
            elif what == "echo_below":
                query, labels, above, phase = check[1], check[2], check[3], check[4]
                ids = (early if phase == 2 else searches).get((sc.name, query, phase), [])
                src = (
                    (early.get(("records", sc.name)) or {}).get(above)
                    if phase == 2
                    else reading.record(sc, above)
                )
                src_id = src["record_id"] if src else None
                for label in labels:
                    rec = reading.record(sc, label)
                    if rec is None or rec["record_id"] not in ids:
                        continue  # an echo not shown at all is below everything
                    ok = src_id in ids and ids.index(src_id) < ids.index(rec["record_id"])
                    echo_above.add(
                        ok, (sc.name, label, rec["record_id"], f"ranked above {above} ({phase})", ids[:5])
                    )
            elif what == "repeats":
                recs = [reading.record(sc, label) for label in check[1]]
                roots = {(reading.root(r) or {}).get("record_id") for r in recs if r}
                tally = echo_folded if sc.kind == "echo" else chores_merged
                expected = len(check[1]) - 1
                got = len(check[1]) - len(roots) if all(recs) else 0
                for n in range(expected):
                    tally.add(
                        n < got,
                        (
                            sc.name,
                            check[1][n + 1] if n + 1 < len(check[1]) else "",
                            None,
                            "merged",
                            f"{len(roots)} survivors",
                        ),
                    )
                for label, rec in zip(check[1], recs):
                    if rec and sc.kind == "chores":
                        clean(sc, label, ("superseded_by", "freshness"))
            elif what == "no_claim":
                for label in check[1]:
                    rec = reading.record(sc, label)
                    if rec is None:
                        continue
                    claimless.add(
                        not rec.get("claims"), (sc.name, label, rec["record_id"], "claims", rec.get("claims"))
                    )
                    if label == "failed":
                        listed = "**Changed:**" in (rec.get("summary") or "")
                        changed_listed.add(
                            not listed, (sc.name, label, rec["record_id"], "summary", "lists **Changed:**")
                        )
            elif what == "apart":
                groups = check[1]
                member_of = {}
                for gi, labels in enumerate(groups):
                    for label in labels:
                        rec = reading.record(sc, label)
                        if rec:
                            member_of[rec["record_id"]] = gi
                for gi, labels in enumerate(groups):
                    for label in labels:
                        rec = reading.record(sc, label)
                        if not rec:
                            continue
                        root = reading.root(rec)
                        wrong = root is not None and member_of.get(root["record_id"], gi) != gi
                        if len(labels) == 1:
                            lookalike_merged.add(
                                not wrong,
                                (sc.name, label, rec["record_id"], "merged_into", rec.get("merged_into")),
                            )
                            false.add(
                                not wrong,
                                (sc.name, label, rec["record_id"], "merged_into", rec.get("merged_into")),
                            )
                            clean(sc, label, ("superseded_by", "freshness"))
    return {
        "false": false,
        "superseded": superseded,
        "newer": newer,
        "cites": cites,
        "top": top,
        "echo_above": echo_above,
        "chores_merged": chores_merged,
        "echo_folded": echo_folded,
        "lookalike": lookalike_merged,
        "claimless": claimless,
        "changed_listed": changed_listed,
        "missing": missing,
    }


def cpu() -> float:
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


def coverage(world) -> str:
    """What the world exercised: formats, agents, the person's operations (counts)."""
    counts: dict = {}
    for sc in world.scenarios:
        for item in (f"format {sc.config.fmt}", *(f"op {o}" for o in sc.ops_done if o != "commit")):
            counts[item] = counts.get(item, 0) + 1
        for turn in sc.turns.values():
            counts[f"agent {turn.agent}"] = counts.get(f"agent {turn.agent}", 0) + 1
        if not sc.project.use_git:
            counts["project without git"] = counts.get("project without git", 0) + 1
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))


def consolidate_all(world, apply: bool, jobs: int, scenarios=None):
    def one(sc):
        args = ["consolidate", "--project", sc.project.root] + (["--apply"] if apply else [])
        return sc.name, world.cli_json(*args)

    with ThreadPoolExecutor(jobs) as pool:
        return dict(pool.map(one, world.scenarios if scenarios is None else scenarios))


def restore_phase(world, reading: Reading, jobs: int):
    """Restore what the truth says to restore (when kirolearn marked it), play on, and check it lasts."""
    lasting, restored = Tally(), []
    for sc in world.scenarios:
        for check in sc.expect:
            if check[0] != "restore_lasts":
                continue
            rec = reading.record(sc, check[1])
            if rec is None or not rec.get(check[2]):
                continue  # nothing to restore: a miss already counted
            code, out, err = world.cli("restore", rec["record_id"])
            if code != 0:
                lasting.add(
                    False, (sc.name, check[1], rec["record_id"], "restore failed", err.strip()[-200:])
                )
                continue
            restored.append((sc, check[1], rec["record_id"]))
            if "same3" in sc.turns and check[2] == "merged_into":
                world.play_extra(sc, "same3")
    world.drain("after restore")
    consolidate_all(world, True, jobs, list({id(sc): sc for sc, _, _ in restored}.values()))
    after = Reading(world)
    for sc, label, rid in restored:
        rec = after.by_id.get(rid)
        ok = bool(rec) and not rec.get("superseded_by") and not rec.get("merged_into")
        why = ""
        if not ok and rec:
            mark = "merged_into" if rec.get("merged_into") else "superseded_by"
            why = f"{mark} {rec.get(mark)}: {mark_reason(world, rid, STEM[mark])}"
        lasting.add(ok, (sc.name, label, rid, "re-marked", why))
    return lasting


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--half", choices=tuple(claims_world.HALF_BASE), default="tune")
    parser.add_argument("--quick", action="store_true", help="one scenario of each kind (about a minute)")
    parser.add_argument("--per-kind", type=int, default=8, help="scenarios of each kind (default 8)")
    parser.add_argument("--bin", default=os.environ.get("KIROLEARN_BENCH_BIN", DEFAULT_BIN))
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--keep", help="build the world in this folder and keep it")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    per_kind = 1 if args.quick else args.per_kind
    started = time.monotonic()
    base = args.keep or tempfile.mkdtemp(prefix="bench-claims-")
    if args.keep:
        os.makedirs(base, exist_ok=True)
    try:
        world = claims_world.World(base, args.bin, half=args.half, per_kind=per_kind, jobs=args.jobs, log=say)
        say(f"{len(world.scenarios)} scenarios ({args.half} half) in {base}")
        early: dict = {}

        def after_phase(phase):
            if phase != 2:
                return
            reading = Reading(world)
            for sc in world.scenarios:
                for check in sc.expect:
                    if check[0] == "echo_below" and check[4] == 2:
                        early[(sc.name, check[1], 2)] = search_ids(world, sc, check[1])
                        early[("records", sc.name)] = {check[3]: reading.record(sc, check[3])}

        world.play(after_phase)
        say("consolidate --apply in every project (its JSON lists the groups it merged)")
        previews = consolidate_all(world, True, args.jobs)
        searches = {}
        wanted = {
            (i, check[1])
            for i, sc in enumerate(world.scenarios)
            for check in sc.expect
            if check[0] in ("newer_first", "top", "echo_below")
        }
        with ThreadPoolExecutor(args.jobs) as pool:
            for (sc, query), ids in zip(
                wanted, pool.map(lambda item: search_ids(world, world.scenarios[item[0]], item[1]), wanted)
            ):
                searches[(world.scenarios[sc].name, query, 3)] = ids
        reading = Reading(world)
        figures = score(world, early, reading, searches)
        say(
            "restore: the marks kirolearn set where the truth says to undo them, then drain and consolidate again"
        )
        lasting = restore_phase(world, reading, args.jobs)
        seconds = time.monotonic() - started
        previewed = sum(len((p or {}).get("groups") or ()) for p in previews.values())
        false = figures["false"]
        rows = [
            (
                "scenarios (retune, keeper, noop, echo, chores)",
                f"{len(world.scenarios)}",
                f"{args.half} half",
            ),
            (
                "false marks (superseded/merged/changed/deleted)",
                f"{false.total - false.hits} of {false.total}",
                "0",
            ),
            ("changed settings superseded", figures["superseded"].pct(), ">= 90%"),
            ("newer record ranked first for its setting", figures["newer"].pct(), "100%"),
            (
                "echo ranked above the record it cites",
                f"{figures['echo_above'].total - figures['echo_above'].hits} of {figures['echo_above'].total}",
                "0",
            ),
            ("echo cites its source, claims nothing", figures["cites"].pct(), "100%"),
            ("identical chores merged", figures["chores_merged"].pct(), ">= 90%"),
            ("identical echo questions folded", figures["echo_folded"].pct(), ">= 90%"),
            (
                "look-alike chores wrongly merged",
                f"{figures['lookalike'].total - figures['lookalike'].hits} of {figures['lookalike'].total}",
                "0",
            ),
            ("true record in top 5 after talk/hypothetical/failed", figures["top"].pct(), "100%"),
            (
                "talk/hypothetical/failed turns making a claim",
                f"{figures['claimless'].total - figures['claimless'].hits} of {figures['claimless'].total}",
                "0",
            ),
            (
                "failed write listed under Changed",
                f"{figures['changed_listed'].total - figures['changed_listed'].hits} of {figures['changed_listed'].total}",
                "0",
            ),
            ("restores that last (drain + consolidate --apply)", lasting.pct(), "100%"),
            ("groups consolidate --apply merged after the drains", str(previewed), "-"),
            ("turns with no record found", str(len(figures["missing"])), "0"),
            ("hook calls (non-zero exits)", f"{world.hook_calls} ({len(world.hook_failures)})", "- (0)"),
            (
                "drain passes (failed)",
                f"{len(world.drains)} ({sum(1 for d in world.drains if d['code'])})",
                "- (0)",
            ),
            ("wall time", f"{seconds:.0f} s", "< 300 s on 2 quiet cores"),
            ("CPU time, this process and every child", f"{cpu():.0f} s", "-"),
        ]
        if args.json:
            print(json.dumps({name: value for name, value, _ in rows}, indent=2))
        else:
            print_table(f"Memory marks on an independent generator (bench_claims, {args.half} half)", rows)
        if not args.json:
            print("covered: " + coverage(world))
        cases = []
        for name in (
            "false",
            "superseded",
            "newer",
            "echo_above",
            "cites",
            "chores_merged",
            "echo_folded",
            "lookalike",
            "top",
            "claimless",
            "changed_listed",
        ):
            for case in figures[name].cases:
                cases.append((name, case))
        cases += [("restore", c) for c in lasting.cases]
        if cases:
            print("\nwrong or missed (figure: scenario, turn, record, mark, value; evidence):")
            for name, (scn, label, rid, mark, value) in cases:
                evidence = ""
                if name == "false" and rid and mark in ("superseded_by", "merged_into", "freshness"):
                    evidence = mark_reason(world, rid, STEM[mark])
                ops = next((", ".join(sc.ops_done) for sc in world.scenarios if sc.name == scn), "")
                print(
                    f"- {name}: {scn} [{ops}] {label} {rid} {mark}={value}"
                    + (f"; {evidence}" if evidence else "")
                )
        for sc_name, label in figures["missing"]:
            print(f"- no record: {sc_name} {label}")
        for argv_, code, err in world.hook_failures[:5]:
            print(f"- hook {' '.join(argv_)} exited {code}: {err}")
        for d in world.drains:
            if d["code"]:
                print(f"- drain {d['label']} exited {d['code']}: {d['err']}")
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
