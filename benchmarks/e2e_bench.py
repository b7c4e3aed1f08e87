#!/usr/bin/env python3
"""End to end: `daydream replay TRACE` as a whole process, side by side with
HolisticTraceAnalysis loading the same file.

    python3 benchmarks/e2e_bench.py --reps 3 [--with-10m] [--doc docs/performance.md]

For each trace (default: the largest shared trace, owlv2, and the generated
benchmarks/out/big_1m.json.gz, made once with make_big_trace.py if missing;
--with-10m adds a 10M-event one) and for both its .json.gz and an uncompressed
.json copy in benchmarks/out/, every round runs, each in a fresh child (and
likewise for each job, --job NAME=DIR or --with-job: a directory of per-rank
.json.gz files, replayed and loaded as a whole):

  * `daydream replay TRACE` (the project's CLI, .venv/bin/daydream), and
  * a Python child in benchmarks/.venv-hta (made here the first time:
    python3 -m venv + pip install HolisticTraceAnalysis) that imports HTA and
    calls TraceAnalysis(trace_dir=DIR), DIR holding a symlink to the trace
    (HTA takes every *.json / *.gz in the directory as one rank; a trace
    without distributedInfo.rank becomes rank 0).

Wall time is taken around the child; CPU time (user + sys) and peak RSS come
from os.wait4's rusage for that child alone (ru_maxrss: the largest resident
set of the child or of any descendant it waited for). Rounds interleave the
tools so machine noise hits them alike; tables give the median and
[min-max] over rounds, ratios are of medians with the [min-max] of the
per-round ratios. Results go to benchmarks/out/e2e.json; with --doc the
markdown table is rewritten between <!-- e2e:begin --> / <!-- e2e:end -->.
The driver uses the Python standard library only.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "out"
HTA_VENV = ROOT / "benchmarks" / ".venv-hta"
OWLV2 = (ROOT.parent / "shared" / "traces" / "tracelens-nvidia" / "h100-hf-inference"
         / "google_owlv2-large-patch14-ensemble__1016001.json.gz")
# big_2m: its graph has about 1.0 M tasks (benchmarks/search_bench.py).
GENERATED = {"big_1m": 1_000_000, "big_2m": 2_300_000, "big_10m": 10_000_000}
MIB = 1024 * 1024

# Runs in the HTA venv. Import and load are timed separately; the last line of
# stdout carries the result.
HTA_CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
from hta.trace_analysis import TraceAnalysis
t1 = time.perf_counter()
analysis = TraceAnalysis(trace_dir=sys.argv[1])
t2 = time.perf_counter()
ranks = analysis.t.get_ranks()
print("E2E_RESULT " + json.dumps({"import_s": t1 - t0, "load_s": t2 - t1, "ranks": list(ranks),
      "rows": sum(len(analysis.t.get_trace(r)) for r in ranks)}), flush=True)
"""


def log(msg: str) -> None:
    print(f"e2e_bench: {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- children


def run_child(argv: Sequence[str], timeout_s: float) -> Dict[str, Any]:
    """Runs argv in a fresh process; wall time, CPU time and peak RSS of it alone."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(list(argv), stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        timer = threading.Timer(timeout_s, proc.kill)
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        timed_out = time.perf_counter() - t0 >= timeout_s
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode(errors="replace")
        stderr = err.read().decode(errors="replace")
    return {
        "rc": proc.returncode, "timed_out": timed_out, "wall_s": wall,
        "cpu_s": usage.ru_utime + usage.ru_stime, "peak_rss_mib": usage.ru_maxrss / 1024.0,
        "stdout": stdout, "stderr": stderr,
    }


def tail(text: str, n: int = 15) -> str:
    return "\n".join(text.strip().splitlines()[-n:])


# ---------------------------------------------------------------- setup


def daydream_cli(explicit: Optional[str]) -> str:
    for cand in (explicit, os.environ.get("DAYDREAM"), str(ROOT / ".venv" / "bin" / "daydream"),
                 shutil.which("daydream")):
        if cand and Path(cand).is_file() and os.access(cand, os.X_OK):
            return cand
    sys.exit("e2e_bench: the daydream CLI is not installed: run `make install` (it goes to .venv/bin/daydream) "
             "or pass --daydream PATH")


def hta_python(spec: str) -> Tuple[str, str]:
    """The HTA venv's python (made on first use) and the installed HTA version."""
    py = HTA_VENV / "bin" / "python"
    probe = [str(py), "-c", "import importlib.metadata as m, hta.trace_analysis; "
             "print(m.version('HolisticTraceAnalysis'))"]
    if py.exists():
        r = subprocess.run(probe, capture_output=True, text=True)
        if r.returncode == 0:
            return str(py), r.stdout.strip()
    log(f"creating {HTA_VENV.relative_to(ROOT)} and installing {spec} (first run only)")
    subprocess.run([sys.executable, "-m", "venv", str(HTA_VENV)], check=True)
    subprocess.run([str(py), "-m", "pip", "install", "--quiet", "--upgrade", "pip"], check=False)
    subprocess.run([str(py), "-m", "pip", "install", "--quiet", spec], check=True)
    r = subprocess.run(probe, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"e2e_bench: HTA does not import in {HTA_VENV}:\n{tail(r.stderr)}")
    return str(py), r.stdout.strip()


def ensure_generated(name: str, path: Path) -> None:
    if path.exists() or name not in GENERATED:
        return
    log(f"generating {path.relative_to(ROOT)} ({GENERATED[name]:,} events, once)")
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "make_big_trace.py"),
                    "--events", str(GENERATED[name]), "--out", str(path)], check=True)


def uncompressed_copy(name: str, gz: Path) -> Path:
    """benchmarks/out/<name>.json, remade when older than the .json.gz."""
    dst = OUT / f"{name}.json"
    if not dst.exists() or dst.stat().st_mtime < gz.stat().st_mtime:
        log(f"gunzip {gz} -> {dst.relative_to(ROOT)}")
        tmp = dst.with_suffix(".json.tmp")
        with gzip.open(gz, "rb") as src, open(tmp, "wb") as out:
            shutil.copyfileobj(src, out, 16 * MIB)
        tmp.replace(dst)
    return dst


def read_through(path: Path) -> None:
    """Puts the file in the page cache so no tool pays for the first disk read."""
    with open(path, "rb") as f:
        while f.read(16 * MIB):
            pass


# ---------------------------------------------------------------- measuring


def stats(xs: List[float]) -> Dict[str, float]:
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs)}


def one_round(rec: Dict[str, Any], target: Path, hta_dir: Path, hta_py: Optional[str], dd: str, timeout: float,
              what: str) -> None:
    """`daydream replay target`, then (with hta_py, until it first fails)
    HTA's TraceAnalysis(trace_dir=hta_dir), each in a fresh child; appended to rec."""
    r = run_child([dd, "replay", str(target)], timeout)
    if r["rc"] != 0:
        sys.exit(f"e2e_bench: daydream replay {target} failed (rc {r['rc']}):\n{tail(r['stderr'])}")
    rec["daydream"].append({k: r[k] for k in ("wall_s", "cpu_s", "peak_rss_mib")})
    msg = f"{what}: daydream {r['wall_s']:.2f} s {r['peak_rss_mib']:.0f} MiB"
    if hta_py and rec["hta_error"] is None:
        h = run_child([hta_py, "-c", HTA_CHILD, str(hta_dir)], timeout)
        line = next((ln for ln in reversed(h["stdout"].splitlines()) if ln.startswith("E2E_RESULT ")), None)
        if h["rc"] != 0 or line is None:
            why = "timed out" if h["timed_out"] else f"exit status {h['rc']}"
            rec["hta_error"] = f"{why}: {tail(h['stderr'] or h['stdout'], 8)}"
            msg += f"; HTA failed ({why})"
        else:
            inner = json.loads(line[len("E2E_RESULT "):])
            rec["hta"].append({**{k: h[k] for k in ("wall_s", "cpu_s", "peak_rss_mib")}, **inner})
            msg += f"; HTA {h['wall_s']:.2f} s (load {inner['load_s']:.2f} s) {h['peak_rss_mib']:.0f} MiB"
    log(msg)


def measure_trace(name: str, gz: Path, args: argparse.Namespace, dd: str, hta_py: Optional[str]) -> Dict[str, Any]:
    plain = uncompressed_copy(name, gz)
    files = {"json.gz": gz, "json": plain}
    json_bytes = plain.stat().st_size
    hta_skip = None
    if hta_py is None:
        hta_skip = "not run (--no-hta)"
    elif args.hta_max_json_mb and json_bytes > args.hta_max_json_mb * 1e6:
        hta_skip = (f"not run: JSON is {json_bytes / 1e6:,.0f} MB, over --hta-max-json-mb {args.hta_max_json_mb:g} "
                    "(a default that keeps HTA's whole-file json.load off multi-GB files; 0 lifts it)")
    result: Dict[str, Any] = {
        "name": name, "gzip_path": str(gz), "gzip_bytes": gz.stat().st_size, "json_bytes": json_bytes,
        "hta_skipped": hta_skip, "loadavg_before": os.getloadavg(), "inputs": {},
    }
    with tempfile.TemporaryDirectory(prefix=f"e2e_hta_{name}_") as tmp:
        hta_dirs = {}
        for fmt, path in files.items():
            read_through(path)
            d = Path(tmp) / fmt.replace(".", "_")
            d.mkdir()
            (d / f"{name}.{fmt}").symlink_to(path.resolve())
            hta_dirs[fmt] = d
            result["inputs"][fmt] = {"path": str(path), "bytes": path.stat().st_size,
                                     "daydream": [], "hta": [], "hta_error": None}
        for rnd in range(args.reps):
            for fmt, path in files.items():
                one_round(result["inputs"][fmt], path, hta_dirs[fmt], hta_py if hta_skip is None else None, dd,
                          args.timeout, f"{name} {fmt} round {rnd + 1}/{args.reps}")
    result["loadavg_after"] = os.getloadavg()
    for rec in result["inputs"].values():
        summarize(rec, json_bytes)
    return result


def ensure_job(d: Path, ranks: int, events: int) -> None:
    """benchmarks/out/<job>: `ranks` .json.gz files of `events` events each, made once."""
    if d.is_dir() and len(list(d.glob("*.json.gz"))) == ranks:
        return
    log(f"generating {d.relative_to(ROOT)} ({ranks} ranks x {events:,} events, .json.gz, once)")
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "make_big_trace.py"), "--events", str(events),
                    "--ranks", str(ranks), "--gzip", "--out", str(d)], check=True)


def measure_job(name: str, d: Path, args: argparse.Namespace, dd: str, hta_py: Optional[str]) -> Dict[str, Any]:
    """A directory of per-rank .json.gz files: `daydream replay DIR` (every rank
    read, built and replayed) next to HTA's TraceAnalysis(trace_dir=DIR), which
    parses the ranks in a process pool."""
    files = sorted(d.glob("*.json.gz"))
    if not files:
        sys.exit(f"e2e_bench: {d} holds no .json.gz files")
    json_bytes = 0
    for f in files:
        read_through(f)
        with gzip.open(f, "rb") as src:
            while chunk := src.read(16 * MIB):
                json_bytes += len(chunk)
    label = f"{name} ({len(files)} ranks)"
    rec: Dict[str, Any] = {"path": str(d), "bytes": sum(f.stat().st_size for f in files),
                           "daydream": [], "hta": [], "hta_error": None}
    result: Dict[str, Any] = {"name": label, "gzip_path": str(d), "gzip_bytes": rec["bytes"], "json_bytes": json_bytes,
                              "hta_skipped": None if hta_py else "not run (--no-hta)",
                              "loadavg_before": os.getloadavg(), "inputs": {"json.gz": rec}}
    for rnd in range(args.reps):
        one_round(rec, d, d, hta_py, dd, args.timeout, f"{label} round {rnd + 1}/{args.reps}")
    result["loadavg_after"] = os.getloadavg()
    summarize(rec, json_bytes)
    return result


def summarize(rec: Dict[str, Any], json_bytes: int) -> None:
    s: Dict[str, Any] = {}
    for tool in ("daydream", "hta"):
        runs = rec[tool]
        if not runs:
            continue
        keys = ["wall_s", "cpu_s", "peak_rss_mib"] + (["load_s", "import_s"] if tool == "hta" else [])
        s[tool] = {k: stats([r[k] for r in runs]) for k in keys}
        s[tool]["peak_rss_x_json"] = s[tool]["peak_rss_mib"]["median"] * MIB / json_bytes
    if "hta" in s and len(rec["hta"]) == len(rec["daydream"]):
        pairs = list(zip(rec["hta"], rec["daydream"]))
        for key, num in (("wall", "wall_s"), ("load_only", "load_s"), ("cpu", "cpu_s"), ("rss", "peak_rss_mib")):
            den = "wall_s" if key == "load_only" else num
            per_round = [h[num] / d[den] for h, d in pairs]
            s[f"ratio_{key}"] = {"of_medians": s["hta"][num]["median"] / s["daydream"][den]["median"],
                                 "min": min(per_round), "max": max(per_round)}
    rec["summary"] = s


# ---------------------------------------------------------------- reporting


def cell(st: Dict[str, float], fmt: str = "{:.2f}") -> str:
    return f"{fmt.format(st['median'])} [{fmt.format(st['min'])}–{fmt.format(st['max'])}]"


def ratio(r: Dict[str, float], digits: int = 1) -> str:
    f = f"{{:.{digits}f}}"
    return f"{f.format(r['of_medians'])}× [{f.format(r['min'])}–{f.format(r['max'])}]"


def tables(results: List[Dict[str, Any]], meta: Dict[str, Any]) -> str:
    lines = [
        f"Measured with `{meta['command']}` on {meta['machine']}; daydream at `{meta['git_commit']}`, "
        f"HolisticTraceAnalysis {meta['hta_version'] or '(not run)'} (Python {meta['hta_python'] or '-'}), "
        f"{meta['reps']} rounds. Median [min–max] over rounds; ratios are of the medians, "
        "[min–max] of the per-round ratios (tools interleaved within each round).",
        "",
        "Time, whole process (wall seconds; CPU = user + sys of the child):",
        "",
        "| trace | file | daydream replay wall s | daydream CPU s | HTA wall s | HTA `TraceAnalysis()` only s "
        "| HTA CPU s | HTA / daydream wall | HTA load only / daydream wall | HTA / daydream CPU |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    mem = [
        "",
        "Peak memory (peak RSS of the child in MiB; × = median peak RSS / uncompressed JSON size):",
        "",
        "| trace | file | file size | JSON size | daydream peak RSS | HTA peak RSS | HTA / daydream |",
        "|---|---|---|---|---|---|---|",
    ]
    fl = meta["floor"]
    floor = [f"`daydream --version` {fl['daydream']['wall_s']:.2f} s, {fl['daydream']['peak_rss_mib']:.0f} MiB"]
    if "hta" in fl:
        floor.append(f"`import hta.trace_analysis` {fl['hta']['wall_s']:.2f} s, {fl['hta']['peak_rss_mib']:.0f} MiB")
    mem_tail = ["", "Floor (process start and imports, no trace; median of 3): " + "; ".join(floor) + "."]
    notes = []
    for res in results:
        for fmt, rec in res["inputs"].items():
            s = rec["summary"]
            d = s["daydream"]
            if "hta" in s:
                h = s["hta"]
                hta_t = [cell(h["wall_s"]), cell(h["load_s"]), cell(h["cpu_s"])]
            else:
                hta_t = ["—", "—", "—"]
            rat = ([ratio(s["ratio_wall"]), ratio(s["ratio_load_only"]), ratio(s["ratio_cpu"])]
                   if "ratio_wall" in s else ["—", "—", "—"])
            lines.append(f"| {res['name']} | .{fmt} | {cell(d['wall_s'])} | {cell(d['cpu_s'])} | "
                         + " | ".join(hta_t + rat) + " |")
            hta_m = (f"{cell(h['peak_rss_mib'], '{:,.0f}')} ({h['peak_rss_x_json']:.1f}×)" if "hta" in s else "—")
            mem.append(f"| {res['name']} | .{fmt} | {rec['bytes'] / 1e6:,.1f} MB | {res['json_bytes'] / 1e6:,.1f} MB "
                       f"| {cell(d['peak_rss_mib'], '{:,.0f}')} ({d['peak_rss_x_json']:.1f}×) | {hta_m} "
                       f"| {ratio(s['ratio_rss']) if 'ratio_rss' in s else '—'} |")
            if rec["hta_error"]:
                notes.append(f"- HTA failed on {res['name']} .{fmt}: `{rec['hta_error'].splitlines()[-1]}`")
        if res["hta_skipped"]:
            notes.append(f"- HTA on {res['name']}: {res['hta_skipped']}")
    return "\n".join(lines + mem + mem_tail + ([""] + notes if notes else []))


def replace_block(doc: Path, key: str, text: str) -> None:
    # Same marker convention as capture_bench.replace_block (which cannot be
    # imported here: that module needs torch, this driver is stdlib only).
    begin, end = f"<!-- {key}:begin -->", f"<!-- {key}:end -->"
    old = doc.read_text() if doc.exists() else ""
    if begin not in old:
        old += f"\n{begin}\n{end}\n"
    head, rest = old.split(begin, 1)
    doc.write_text(f"{head}{begin}\n{text}\n{end}{rest.split(end, 1)[1]}")


def machine() -> str:
    model = ""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1024 ** 3
    return f"{os.cpu_count()} vCPU ({model}), {mem:.0f} GiB RAM, Linux {platform.release()}"


def git_commit() -> str:
    r = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--", "cpp", "python"],
                           capture_output=True, text=True).stdout.strip()
    return (r.stdout.strip() or "unknown") + (" + local changes under cpp/ or python/" if dirty else "")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=3, help="rounds per trace (each runs every tool on every file)")
    p.add_argument("--trace", action="append", metavar="NAME=PATH",
                   help="a .json.gz trace (repeatable); default: owlv2 and big_1m")
    p.add_argument("--with-10m", action="store_true", help="add big_10m (generated once, ~160 MB gzip, 2 GB JSON)")
    p.add_argument("--job", action="append", metavar="NAME=DIR",
                   help="a directory of per-rank .json.gz files, replayed as one job (repeatable; "
                   "without --trace, only the jobs are measured)")
    p.add_argument("--with-job", action="store_true",
                   help="add job8: 8 ranks of 250k events each (generated once into benchmarks/out/job8)")
    p.add_argument("--no-hta", action="store_true", help="daydream only")
    p.add_argument("--hta-spec", default="HolisticTraceAnalysis", help="pip requirement for the HTA venv")
    p.add_argument("--hta-max-json-mb", type=float, default=1000,
                   help="skip HTA on traces whose JSON is bigger (0: no limit)")
    p.add_argument("--daydream", help="daydream CLI (default: .venv/bin/daydream, then PATH)")
    p.add_argument("--timeout", type=float, default=1800, help="seconds per child")
    p.add_argument("--json", default=str(OUT / "e2e.json"))
    p.add_argument("--doc", help="rewrite the <!-- e2e:begin/end --> block of this markdown file")
    p.add_argument("--render", metavar="E2E_JSON", help="measure nothing: print (and with --doc write) the "
                   "tables of a results file this script wrote")
    args = p.parse_args()
    if args.render:
        saved = json.loads(Path(args.render).read_text())
        text = tables(saved["traces"], saved["meta"])
        print(text)
        if args.doc:
            replace_block(Path(args.doc), "e2e", text)
        return 0

    OUT.mkdir(parents=True, exist_ok=True)
    # --job alone measures only its jobs; --with-job adds job8 to the default traces.
    specs = args.trace or ([] if args.job else [f"owlv2={OWLV2}", f"big_1m={OUT / 'big_1m.json.gz'}"])
    if args.with_10m:
        specs.append(f"big_10m={OUT / 'big_10m.json.gz'}")
    traces = []
    for spec in specs:
        name, _, path = spec.partition("=")
        gz = Path(path).resolve() if path else None
        if not name or gz is None:
            sys.exit(f"e2e_bench: --trace wants NAME=PATH, got {spec!r}")
        ensure_generated(name, gz)
        if not gz.is_file() or not gz.name.endswith(".json.gz"):
            sys.exit(f"e2e_bench: {gz} is not a .json.gz file")
        traces.append((name, gz))
    jobs = []
    for spec in (args.job or []) + ([f"job8={OUT / 'job8'}"] if args.with_job else []):
        name, _, path = spec.partition("=")
        if not name or not path:
            sys.exit(f"e2e_bench: --job wants NAME=DIR, got {spec!r}")
        d = Path(path).resolve()
        if name == "job8" and d == (OUT / "job8").resolve():
            ensure_job(d, 8, 250_000)
        if not d.is_dir():
            sys.exit(f"e2e_bench: {d} is not a directory")
        jobs.append((name, d))

    dd = daydream_cli(args.daydream)
    hta_py, hta_version = (None, None) if args.no_hta else hta_python(args.hta_spec)
    hta_pyver = None
    if hta_py:
        hta_pyver = subprocess.run([hta_py, "-c", "import platform; print(platform.python_version())"],
                                   capture_output=True, text=True).stdout.strip()
        subprocess.run([hta_py, "-c", "import hta.trace_analysis"], capture_output=True)  # warm .pyc / page cache
    # The floor: a process that starts and imports, with no trace.
    floor = {"daydream": [run_child([dd, "--version"], args.timeout) for _ in range(3)]}
    if hta_py:
        floor["hta"] = [run_child([hta_py, "-c", "import hta.trace_analysis"], args.timeout) for _ in range(3)]
    floor = {tool: {k: statistics.median(r[k] for r in runs) for k in ("wall_s", "peak_rss_mib")}
             for tool, runs in floor.items()}

    argv = [a for a in sys.argv[1:]]
    core = None
    with open(dd, "rb") as f:
        shebang = f.readline().decode(errors="replace")
    if shebang.startswith("#!"):  # the console script's Python: which extension it loads, built when
        r = subprocess.run([shebang[2:].strip(), "-c", "import os, time, daydream._core as c; "
                            "print(c.__file__, time.strftime('%Y-%m-%d %H:%M', time.localtime(os.path.getmtime(c.__file__))))"],
                           capture_output=True, text=True)
        core = r.stdout.strip() or None
    meta = {
        "command": "python3 benchmarks/e2e_bench.py" + ("" if not argv else " " + " ".join(argv)),
        "machine": machine(), "git_commit": git_commit(), "daydream_cli": dd, "daydream_core": core,
        "hta_version": hta_version, "hta_python": hta_pyver, "reps": args.reps,
        "started": time.strftime("%Y-%m-%d %H:%M:%S %z"), "floor": floor,
    }
    results = [measure_trace(name, gz, args, dd, hta_py) for name, gz in traces]
    results += [measure_job(name, d, args, dd, hta_py) for name, d in jobs]
    meta["finished"] = time.strftime("%Y-%m-%d %H:%M:%S %z")
    Path(args.json).write_text(json.dumps({"meta": meta, "traces": results}, indent=1) + "\n")
    text = tables(results, meta)
    print(text)
    log(f"wrote {args.json}")
    if args.doc:
        replace_block(Path(args.doc), "e2e", text)
        log(f"updated the e2e block of {args.doc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
