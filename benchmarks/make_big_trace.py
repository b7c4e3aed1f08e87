#!/usr/bin/env python3
"""Writes a large, realistic Kineto trace by repeating the iterations of a real one.

The iterations (ProfilerStep#N ranges) of a source trace are cut out once and
written again and again, each copy shifted in time and given fresh ids, until
the target number of events is reached:

  * CPU events whose start lies inside the selected steps' window are kept;
    GPU activities (kernels, copies, memsets, cuda_sync records) follow the
    runtime call that launched them (by correlation), so a step's GPU work that
    runs past the step's end is kept and a previous step's is not; flows ('s',
    't', 'f') are kept per (category, id) when their first endpoint is inside.
  * copy c is shifted by c * period, where period covers the window and any
    GPU work that runs past it, so copies never overlap on any thread or stream;
  * every id-like field (args correlation, External id, Sequence number,
    Record function id, wait_on_cuda_event_record_corr_id, Python id / parent
    id, and the 'id' of flow events) gets c * stride added, one stride for all
    of them, so every relation between ids (a launch and its kernel, an ac2g
    flow and its correlation, a forward op and its backward op) holds inside a
    copy and no id repeats across copies;
  * ProfilerStep#N annotations are renumbered so step numbers keep increasing.

Metadata ('M') events and the top-level fields are written once. Times are
handled as integer nanoseconds (the source's microsecond text is read
exactly), so ns fractions survive the shift. The target is met with whole
copies and then whole steps of one more copy, so the result stays consistent.

File order (--order file, the default) imitates a long Kineto trace: the
source is cut where its CPU or GPU times go back (a real trace has a handful
of such time-sorted runs) and each run is written for every copy before the
next, so the output has as few sorted runs as the source. --order copy writes
copy after copy instead (as many runs as copies times the source's).

Events are written as they are generated (each source event is serialized
once into a template; a copy only fills in times and ids), so memory stays at
the size of the source trace whatever the output size (10M events: ~150 MB of
Python, 2 GB of JSON).

With --ranks K, K files rank-<r>.trace.json[.gz] go into the --out
directory: the same iterations, with distributedInfo.rank = r and
world_size = K, each rank in its own process (pid + r) on its own GPU
(device + r).

Examples:
  python3 benchmarks/make_big_trace.py --events 1000000 --out benchmarks/out/big_1m.json
  python3 benchmarks/make_big_trace.py --events 10000000 --out benchmarks/out/big_10m.json.gz
  python3 benchmarks/make_big_trace.py --events 200000 --ranks 8 --out benchmarks/out/job8 --gzip

Standard library only.
"""

import argparse
import bisect
import decimal
import gzip
import json
import os
import re
import sys

DEFAULT_SOURCE = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "traces", "hta-v100-1rank",
    "rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz")

# Args whose values are ids in one shared space per trace copy.
ID_ARGS = ("correlation", "External id", "Sequence number", "Record function id",
           "wait_on_cuda_event_record_corr_id", "Python id", "Python parent id")
# Categories of GPU-timeline events (pid = device, tid = stream).
GPU_CATS = {"kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "Memset",
            "gpu_user_annotation", "cuda_sync"}
# Categories of CPU calls that launch GPU work (they carry the correlation).
LAUNCH_CATS = {"cuda_runtime", "Runtime", "cuda_driver"}
STEP_RE = re.compile(r"^ProfilerStep#(\d+)$")
# A private-use character json.dumps(ensure_ascii=False) leaves as it is.
SENTINEL = "\ue000DD{}\ue000"
SENTINEL_RE = re.compile("\ue000DD(\\d+)\ue000")
GPU_LABEL_RE = re.compile(r"^GPU (\d+)$")


def to_ns(value):
    """Microseconds (int, Decimal) -> integer nanoseconds, exactly."""
    if isinstance(value, bool) or value is None:
        raise ValueError("not a time")
    if isinstance(value, int):
        return value * 1000
    if isinstance(value, decimal.Decimal):
        return int((value * 1000).to_integral_value(rounding=decimal.ROUND_HALF_EVEN))
    if isinstance(value, float):
        return int(round(value * 1000))
    raise ValueError("not a time")


def fmt_us(ns):
    """Integer ns -> microsecond text with 3 decimals, as Kineto writes it."""
    sign = "-" if ns < 0 else ""
    ns = abs(ns)
    return "%s%d.%03d" % (sign, ns // 1000, ns % 1000)


def plain(value):
    """Decimal -> float everywhere (for json.dumps), recursively."""
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def is_int_id(value):
    return isinstance(value, int) and not isinstance(value, bool)


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        data = json.load(f, parse_float=decimal.Decimal)
    if isinstance(data, list):
        data = {"traceEvents": data}
    return data


class Template:
    """One source event, serialized once, with slots for what changes per copy."""

    __slots__ = ("parts", "slots")

    def __init__(self, parts, slots):
        self.parts = parts  # literal text, len(slots) + 1 pieces
        self.slots = slots  # (kind, value): kind in ts / id / step / pid / device / label

    def render(self, shift_ns, id_offset, step_offset, rank_map):
        out = [self.parts[0]]
        for (kind, value), part in zip(self.slots, self.parts[1:]):
            if kind == "ts":
                out.append(fmt_us(value + shift_ns))
            elif kind == "id":
                out.append(str(value + id_offset))
            elif kind == "step":
                out.append(json.dumps("ProfilerStep#%d" % (value + step_offset)))
            elif kind == "pid":
                out.append(str(rank_map(value)))
            elif kind == "device":
                out.append(str(rank_map(value)))
            elif kind == "label":
                out.append('"GPU %d"' % rank_map(value))
            out.append(part)
        return "".join(out)


def make_template(ev):
    """Serializes `ev` with sentinels in the changing places."""
    slots = []

    def slot(kind, value):
        slots.append((kind, value))
        return SENTINEL.format(len(slots) - 1)

    e = dict(ev)
    if "ts" in e:
        e["ts"] = slot("ts", to_ns(e["ts"]))
    if "dur" in e:
        e["dur"] = slot("dur", to_ns(e["dur"]))  # exact text, baked in below
    if e.get("ph") in ("s", "t", "f") and is_int_id(e.get("id")):
        e["id"] = slot("id", e["id"])
    name = e.get("name")
    if isinstance(name, str):
        m = STEP_RE.match(name)
        if m:
            e["name"] = slot("step", int(m.group(1)))
    if is_int_id(e.get("pid")):
        e["pid"] = slot("pid", e["pid"])
    args = e.get("args")
    if isinstance(args, dict):
        args = dict(args)
        for key in ID_ARGS:
            if is_int_id(args.get(key)):
                args[key] = slot("id", args[key])
        if is_int_id(args.get("device")):
            args["device"] = slot("device", args["device"])
        labels = args.get("labels")
        if isinstance(labels, str) and GPU_LABEL_RE.match(labels):
            args["labels"] = slot("label", int(GPU_LABEL_RE.match(labels).group(1)))
        e["args"] = args
    text = json.dumps(plain(e), ensure_ascii=False, separators=(", ", ": "))
    pieces = SENTINEL_RE.split(text)
    # pieces: literal, index, literal, index, ... ; every sentinel sits inside quotes.
    parts, ordered = [], []
    for i, piece in enumerate(pieces):
        if i % 2 == 0:
            if i > 0:
                piece = piece[1:]  # closing quote of the sentinel string
            if i + 1 < len(pieces):
                piece = piece[:-1]  # opening quote
            parts.append(piece)
        else:
            ordered.append(slots[int(piece)])
    # dur never changes: bake it into the literal text.
    merged_parts, merged_slots = [parts[0]], []
    for (kind, value), part in zip(ordered, parts[1:]):
        if kind == "dur":
            merged_parts[-1] += fmt_us(value) + part
        else:
            merged_slots.append((kind, value))
            merged_parts.append(part)
    return Template(merged_parts, merged_slots)


def time_class(e):
    """'cpu' or 'gpu' for complete/instant events, None for flows (they follow their events)."""
    if e.get("ph") in ("s", "t", "f"):
        return None
    return "gpu" if e.get("cat") in GPU_CATS else "cpu"


def select_unit(events, skip_steps, num_steps):
    """(event, step index) of the selected iterations, the period (ns), the step-number span."""
    body = [e for e in events if isinstance(e, dict) and e.get("ph") != "M"]
    steps = []
    for e in body:
        name = e.get("name")
        if e.get("ph") == "X" and isinstance(name, str) and STEP_RE.match(name) and \
                e.get("cat") not in GPU_CATS and "ts" in e and "dur" in e:
            steps.append((to_ns(e["ts"]), to_ns(e["ts"]) + to_ns(e["dur"]), e))
    steps.sort(key=lambda s: s[0])
    if steps:
        chosen = steps[skip_steps:]
        if num_steps:
            chosen = chosen[:num_steps]
        if not chosen:
            sys.exit("make_big_trace: --skip-steps %d leaves none of the %d ProfilerSteps" %
                     (skip_steps, len(steps)))
        lo, hi = chosen[0][0], max(s[1] for s in chosen)
        step_numbers = [int(STEP_RE.match(s[2]["name"]).group(1)) for s in chosen]
        step_span = max(step_numbers) - min(step_numbers) + 1
        # Steps of the source outside the selection would clash with renumbered copies.
        chosen_ids = {id(s[2]) for s in chosen}
        other_steps = {id(s[2]) for s in steps if id(s[2]) not in chosen_ids}
    else:
        times = [to_ns(e["ts"]) for e in body if "ts" in e]
        lo, hi = min(times), max(times) + 1
        step_span = 0
        other_steps = set()

    starts = [s[0] for s in chosen] if steps else [lo]

    def step_of_time(t):
        """Index of the selected step whose window holds `t`, None outside."""
        if t is None or not lo <= t < hi:
            return None
        return max(0, bisect.bisect_right(starts, t) - 1)

    def ts_of(e):
        return to_ns(e["ts"]) if "ts" in e else None

    launch_step = {}
    for e in body:
        if e.get("ph") == "X" and e.get("cat") in LAUNCH_CATS:
            corr = (e.get("args") or {}).get("correlation")
            if is_int_id(corr):
                launch_step[corr] = step_of_time(ts_of(e))
    flow_first = {}
    for e in body:
        if e.get("ph") in ("s", "t", "f") and "ts" in e:
            key = (e.get("cat"), e.get("id"))
            t = to_ns(e["ts"])
            if key not in flow_first or t < flow_first[key]:
                flow_first[key] = t
    unit = []  # (event, index of its step)
    for e in body:
        if id(e) in other_steps:
            continue
        ph = e.get("ph")
        if ph in ("s", "t", "f"):
            step = step_of_time(flow_first.get((e.get("cat"), e.get("id"))))
        elif e.get("cat") in GPU_CATS:
            corr = (e.get("args") or {}).get("correlation")
            step = launch_step[corr] if corr in launch_step else step_of_time(ts_of(e))
        else:
            step = step_of_time(ts_of(e))
        if step is not None:
            unit.append((e, step))
    end = hi
    for e, _ in unit:
        if "ts" in e:
            end = max(end, to_ns(e["ts"]) + (to_ns(e["dur"]) if "dur" in e else 0))
    period = end - lo
    period += 1000 - period % 1000  # whole microseconds, at least 1 us of slack
    return unit, period, step_span


def id_stride(unit):
    lo, hi = None, None
    for e, _ in unit:
        values = []
        if e.get("ph") in ("s", "t", "f") and is_int_id(e.get("id")):
            values.append(e["id"])
        args = e.get("args")
        if isinstance(args, dict):
            values.extend(args[k] for k in ID_ARGS if is_int_id(args.get(k)))
        for v in values:
            lo = v if lo is None else min(lo, v)
            hi = v if hi is None else max(hi, v)
    if lo is None:
        return 1
    # Every copy's ids land in [lo + c*S, hi + c*S]: back to back, as one long
    # recording's counters would run (no rounding up, which would leave the
    # ids several times sparser than any real trace's).
    return max(1, hi - lo + 1)


def write_trace(path, top, meta, blocks, copies, tail_steps, period, stride, step_span, rank, world,
                compresslevel, gzip_out):
    """Writes `copies` whole copies, then the first `tail_steps` steps of one more.

    `blocks` is a list of runs of (template, step index); each run is written
    for every copy before the next run starts (see --order).
    """
    def rank_map(value):
        # Rank r runs in its own OS process (pid + r) on its own GPU (device + r).
        return value if rank is None else value + rank

    opener = (lambda p: gzip.open(p, "wt", encoding="utf-8", compresslevel=compresslevel)) \
        if gzip_out else (lambda p: open(p, "w", encoding="utf-8"))
    tmp = path + ".tmp"
    count = 0
    with opener(tmp) as out:
        out.write("{\n")
        for key, value in top.items():
            if key == "distributedInfo" and rank is not None:
                value = dict(value) if isinstance(value, dict) else {}
                value["rank"] = rank
                value["world_size"] = world
                value.setdefault("backend", "nccl")
            out.write("  %s: %s,\n" % (json.dumps(key), json.dumps(plain(value))))
        if rank is not None and "distributedInfo" not in top:
            out.write('  "distributedInfo": %s,\n' %
                      json.dumps({"backend": "nccl", "rank": rank, "world_size": world}))
        out.write('  "traceEvents": [\n')
        first = True
        for t in meta:
            out.write(("  " if first else ",\n  ") + t.render(0, 0, 0, rank_map))
            first = False
            count += 1
        buf = []
        for block in blocks:
            for c in range(copies + (1 if tail_steps else 0)):
                shift, ids, steps = c * period, c * stride, c * step_span
                for t, step in block:
                    if c == copies and step >= tail_steps:
                        continue
                    buf.append(t.render(shift, ids, steps, rank_map))
                    if len(buf) >= 4096:
                        out.write(("  " if first else ",\n  ") + ",\n  ".join(buf))
                        first = False
                        count += len(buf)
                        buf = []
        if buf:
            out.write(("  " if first else ",\n  ") + ",\n  ".join(buf))
            count += len(buf)
        out.write("\n  ]\n}\n")
    os.replace(tmp, path)
    return count


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", default=DEFAULT_SOURCE, help="source trace (.json or .json.gz); "
                    "default: shared/traces/hta-v100-1rank")
    ap.add_argument("--events", type=int, default=1_000_000,
                    help="target number of traceEvents entries: whole copies, then whole steps of "
                    "one more, so at most this many unless one copy is larger; default 1000000")
    ap.add_argument("--copies", type=int, default=0, help="write exactly this many copies (overrides --events)")
    ap.add_argument("--skip-steps", type=int, default=0, help="leave out the first N ProfilerSteps (warm-up)")
    ap.add_argument("--steps", type=int, default=0, help="repeat only this many ProfilerSteps (0: all)")
    ap.add_argument("--out", required=True, help="output file (.json or .json.gz); with --ranks, a directory")
    ap.add_argument("--ranks", type=int, default=0, help="write K per-rank files into the --out directory")
    ap.add_argument("--gzip", action="store_true", help="with --ranks: write .json.gz files")
    ap.add_argument("--level", type=int, default=6, help="gzip compression level (default 6)")
    ap.add_argument("--order", choices=("file", "copy"), default="file",
                    help="file (default): every time-sorted run of the source is written for all "
                    "copies before the next, as Kineto orders a long trace; copy: copy after copy")
    args = ap.parse_args()

    if not os.path.isfile(args.source):
        sys.exit("make_big_trace: source trace not found: %s" % args.source)
    data = load(args.source)
    events = data.get("traceEvents")
    if not isinstance(events, list) or not events:
        sys.exit("make_big_trace: %s has no traceEvents" % args.source)
    top = {k: v for k, v in data.items() if k != "traceEvents"}
    meta_events = [e for e in events if isinstance(e, dict) and e.get("ph") == "M"]
    unit, period, step_span = select_unit(events, args.skip_steps, args.steps)
    if not unit:
        sys.exit("make_big_trace: nothing to repeat in %s" % args.source)
    stride = id_stride(unit)
    meta = [make_template(e) for e in meta_events]
    items = [(make_template(e), step, to_ns(e["ts"]) if "ts" in e else None, time_class(e))
             for e, step in unit]
    per_step = {}
    for _, step in unit:
        per_step[step] = per_step.get(step, 0) + 1
    del data, events, unit
    # Runs to write copy after copy. "file": the source is cut where the times
    # of its CPU or of its GPU events go back (Kineto writes a few such runs,
    # per thread and per buffer, CPU and GPU events interleaved), and each run
    # is written for all copies before the next: the output has as few sorted
    # runs as the source, like a real long trace. "copy": copy after copy.
    blocks = [[]]
    last_ts = {}
    for t, step, ts, cls in items:
        if args.order == "file" and ts is not None and cls is not None:
            if cls in last_ts and ts < last_ts[cls] and blocks[-1]:
                blocks.append([])
                last_ts = {}
            last_ts[cls] = ts
        blocks[-1].append((t, step))
    per_copy = len(items)
    del items
    tail_steps, tail = 0, 0
    if args.copies > 0:
        copies = args.copies
    else:
        budget = args.events - len(meta)
        copies = max(1, budget // per_copy)
        left = budget - copies * per_copy
        for step in sorted(per_step):
            if tail + per_step[step] > left:
                break
            tail += per_step[step]
            tail_steps += 1

    print("make_big_trace: %d events per copy (%d steps), period %.3f ms, id stride %d, "
          "%d copies + %d steps (%d events) of one more, %d sorted runs" %
          (per_copy, len(per_step), period / 1e6, stride, copies, tail_steps, tail, len(blocks)),
          file=sys.stderr)
    if args.ranks > 0:
        os.makedirs(args.out, exist_ok=True)
        ext = ".json.gz" if args.gzip else ".json"
        for r in range(args.ranks):
            path = os.path.join(args.out, "rank-%d.trace%s" % (r, ext))
            n = write_trace(path, top, meta, blocks, copies, tail_steps, period, stride, step_span, r,
                            args.ranks, args.level, args.gzip)
            print("make_big_trace: wrote %s (%d events)" % (path, n), file=sys.stderr)
    else:
        parent = os.path.dirname(os.path.abspath(args.out))
        os.makedirs(parent, exist_ok=True)
        n = write_trace(args.out, top, meta, blocks, copies, tail_steps, period, stride, step_span, None, 0,
                        args.level, args.out.endswith(".gz"))
        print("make_big_trace: wrote %s (%d events)" % (args.out, n), file=sys.stderr)


if __name__ == "__main__":
    main()
