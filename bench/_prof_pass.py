import cProfile, os, pstats, random, sys, tempfile, statistics
sys.argv = [sys.argv[0]]
import bench_scale as bs
tmp = tempfile.mkdtemp(dir="/tmp/prof")
os.environ["KIROLEARN_HOME"] = os.path.join(tmp, "home")
os.environ["KIROLEARN_EMBEDDING_MODEL"] = "none"
projects = [os.path.join(tmp, f"project{k}") for k in range(bs.PROJECTS)]
for p in projects:
    os.makedirs(os.path.join(p, ".git"), exist_ok=True)
rng = random.Random(3)
for n in (20000, 200000):
    bs.fill(n, projects, rng)
    bs.drain_pass(); bs.drain_pass()
    times = []
    for r in range(3):
        bs.spool_turns(projects[3], 100, f"n{n}r{r}")
        if r == 2:
            prof = cProfile.Profile(); prof.enable()
        t, stats = bs.drain_pass()
        if r == 2:
            prof.disable(); prof.dump_stats(f"/tmp/prof/pass{n}.prof")
        times.append(t)
    print(n, "new-work pass CPU s:", [round(x, 3) for x in times], flush=True)
