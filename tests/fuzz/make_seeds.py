#!/usr/bin/env python3
"""Writes the fuzzers' seed corpora: small windows cut from real traces.

    make_seeds.py OUT_DIR [TRACE ...]

OUT_DIR/trace/ gets windows of consecutive events (with the trace's metadata
and top-level fields) from each TRACE, as plain JSON, gzip and the bare-array
form; OUT_DIR/graph/ gets the graphs daydream builds from them (Graph.save's
bytes) where the window makes a valid graph. Windows keep the seeds a few KB,
which libFuzzer mutates far faster than whole traces. The inputs kept in
tests/data/fuzz/ are added to the corpora by the Makefile, not here.
"""
import gzip
import hashlib
import json
import pathlib
import sys

WINDOW = 80       # events per seed
WINDOWS = 6       # seeds per trace, spread over the trace


def windows(doc):
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    meta = [e for e in events if isinstance(e, dict) and e.get("ph") == "M"]
    timed = sorted((e for e in events if isinstance(e, dict) and e.get("ph") != "M" and "ts" in e),
                   key=lambda e: float(e["ts"]))
    top = {k: v for k, v in doc.items() if k != "traceEvents"} if isinstance(doc, dict) else {}
    step = max(1, (len(timed) - WINDOW) // max(1, WINDOWS - 1))
    for i in range(WINDOWS):
        part = timed[i * step:i * step + WINDOW]
        if part:
            yield dict(top, traceEvents=meta + part)


def write(path, data):
    path.write_bytes(data)


def main(argv):
    out = pathlib.Path(argv[1])
    (out / "trace").mkdir(parents=True, exist_ok=True)
    (out / "graph").mkdir(parents=True, exist_ok=True)
    try:
        import daydream
    except ImportError:
        daydream = None
        print("make_seeds.py: daydream not importable; no graph seeds", file=sys.stderr)
    n_trace = n_graph = 0
    for trace in argv[2:]:
        raw = pathlib.Path(trace).read_bytes()
        doc = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
        for k, window in enumerate(windows(doc)):
            text = json.dumps(window, separators=(",", ":")).encode()
            name = f"{pathlib.Path(trace).name.split('.')[0]}-{k}-{hashlib.sha1(text).hexdigest()[:8]}"
            forms = {".json": text, ".json.gz": gzip.compress(text, mtime=0),
                     ".array.json": json.dumps(window["traceEvents"], separators=(",", ":")).encode()}
            for suffix, data in forms.items():
                write(out / "trace" / (name + suffix), data)
                n_trace += 1
            if daydream is None:
                continue
            try:
                graph = daydream.build_graph(daydream.load_trace(out / "trace" / (name + ".json")))
            except daydream.DaydreamError:
                continue
            write(out / "graph" / (name + ".pb"), graph.to_bytes())
            n_graph += 1
    print(f"make_seeds.py: {n_trace} trace seeds, {n_graph} graph seeds in {out}")


if __name__ == "__main__":
    main(sys.argv)
