#!/usr/bin/python3
"""Measures how well a merged trace aligns the clocks of its processes, on nccl-sim's
ground truth (which stays in one true clock whatever the simulated hosts' clocks say).
Run by scripts/measure-clock-alignment.sh, or by hand:

    /usr/bin/python3 scripts/clock-alignment-errors.py RUN/traces.otf2 TRUTH_DIR [--json]

Every operation on an ops stream is matched to its truth by communicator, communicator
rank, function and sequence number; its completion is the moment the GPU finished it where its kernel
channels are in the trace (the trace ends it there), the moment the host knew it complete
otherwise. The trace is in real time on the clock of its reference host (the merge aligns
the others to it), the truth in nccl-sim's true clock, from which each simulated host's
clock is off by its offset and drift: one line C(t) between the two is taken out, the
drift fitted over all operations by least squares, the offset the median of what is left
of (trace end - truth completion). Then, in microseconds:

- completion error: an operation's end - its completion - C(its completion);
- alignment error: per process, the median completion error of its operations (how far
  its clock is placed from the job's), and the same for every operation;
- causality: collectives that end on a rank before another rank began them, and
  receives that end before their send began, in the trace;
- alignment over time: per process, each 100 ms of the run (by the truth), the median
  of its completion errors less the first process's median there, the run's median of
  that taken out: how its clock's placement wanders during the run (a drift taken out
  wrongly, or one that changed).
"""

import collections
import glob
import json
import os
import subprocess
import sys

DUMP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "otf2-dump.py")


def pick(values, q):
    return values[min(len(values) - 1, int(q * len(values)))]


def stats(values):
    values = sorted(values)
    if not values:
        return {"n": 0}
    return {
        "n": len(values),
        "p50": pick(values, 0.5) / 1e3,
        "p99": pick(values, 0.99) / 1e3,
        "max": values[-1] / 1e3,
    }


def line(name, s):
    if not s["n"]:
        return "{:<44} no values".format(name)
    return "{:<44} n={:<5} p50 {:>9.2f}  p99 {:>9.2f}  max {:>9.2f}".format(
        name, s["n"], s["p50"], s["p99"], s["max"]
    )


def main(anchor, truth_dir, as_json):
    dump = json.loads(subprocess.check_output(["/usr/bin/python3", DUMP, anchor]))
    truth = {}
    for path in glob.glob(os.path.join(truth_dir, "truth-*.jsonl")):
        for text in open(path):
            t = json.loads(text)
            truth[(int(t["comm_hash"], 16), t["rank"], t["func"], t["seq"])] = t
    ops = [
        i
        for i in dump["intervals"]
        if i["loc"].endswith(" ops") and "nccl.complete_ns" in i["attrs"]
    ]
    process_of = {l["name"]: l["group"] for l in dump["locations"]}

    def key(i):
        a = i["attrs"]
        comm = a.get("nccl.comm_hash")
        comm = int(comm, 16) if isinstance(comm, str) else comm
        return (comm, a.get("nccl.rank"), a.get("nccl.func"), a.get("nccl.seq"))

    # A communicator rank's kernel channels and ops stream share its name, `<comm> rank <r>`.
    def stream_key(i):
        a = i["attrs"]
        rank_name = i["loc"].rsplit(" channel ", 1)[0].removesuffix(" ops")
        return (rank_name, a.get("nccl.func"), a.get("nccl.seq"))

    gpu_timed = {
        stream_key(i)
        for i in dump["intervals"]
        if i["region"].endswith(" kernel") and "nccl.gpu_time_rejected" not in i["attrs"]
    }
    raw = []
    done_at = []
    for op in ops:
        t = truth.get(key(op))
        if t is not None:
            done = t["gpu_stop_ns"] if stream_key(op) in gpu_timed else t["completion_ns"]
            raw.append((process_of.get(op["loc"], op["loc"]), op["end"] - done))
            done_at.append(done)
    if not raw:
        sys.exit("no operation of the trace matches the truth")
    # The reference host's own drift against the truth is not the trace's error. Computed
    # on differences from the first operation: real-time nanoseconds (about 2^60) in a
    # double would lose everything below 256 ns.
    base_r = raw[0][1]
    raw = [(p, r - base_r) for p, r in raw]
    mean_t = sum(done_at) / len(done_at)
    mean_r = sum(r for _, r in raw) / len(raw)
    spread = sum((t - mean_t) ** 2 for t in done_at)
    drift = (
        sum((t - mean_t) * (r - mean_r) for t, (_, r) in zip(done_at, raw)) / spread
        if spread > 0
        else 0.0
    )
    raw = [(p, r - drift * (t - mean_t)) for (p, r), t in zip(raw, done_at)]
    common = sorted(r for _, r in raw)[len(raw) // 2]
    errors = [r - common for _, r in raw]
    by_process = collections.defaultdict(list)
    for process, r in raw:
        by_process[process].append(r - common)
    process_offsets = {p: sorted(v)[len(v) // 2] for p, v in sorted(by_process.items())}
    over_time = alignment_over_time(raw, done_at)
    # Causality in the trace: per communicator and rank, the k-th collective and the
    # messages in order (as the merge and OTF2 readers match them).
    collectives = collections.defaultdict(list)
    for op in ops:
        if op["region"] in ("Send", "Recv"):
            continue
        comm = op["loc"].rsplit(" rank ", 1)[0]
        collectives[comm, op["loc"]].append((op["start"], op["end"]))
    by_comm = collections.defaultdict(list)
    for (comm, _), spans in collectives.items():
        by_comm[comm].append(spans)
    broken_collectives = 0
    checked_collectives = 0
    for streams in by_comm.values():
        for k in range(min(len(s) for s in streams)):
            last_begin = max(s[k][0] for s in streams)
            first_end = min(s[k][1] for s in streams)
            checked_collectives += 1
            broken_collectives += first_end < last_begin
    sends = collections.defaultdict(list)
    receives = collections.defaultdict(list)
    for m in dump["messages"]:
        own = int(m["loc"].rsplit(" rank ", 1)[1].split()[0])
        if m["kind"] == "send":
            sends[m["comm"], own, m["peer"]].append(m["time"])
        else:
            receives[m["comm"], m["peer"], own].append(m["time"])
    broken_messages = sum(
        r < s for key in sends for s, r in zip(sends[key], receives.get(key, []))
    )
    result = {
        "completion_error_us": stats([abs(e) for e in errors]),
        "alignment_error_us": stats(
            [abs(process_offsets[p]) for p, v in by_process.items() for _ in v]
        ),
        "process_offsets_us": {p: o / 1e3 for p, o in process_offsets.items()},
        "time_base_drift_ppm": drift * 1e6,
        "collectives_ending_before_their_last_begin": broken_collectives,
        "collectives": checked_collectives,
        "receives_before_their_send": broken_messages,
        "alignment_over_time_us": over_time,
    }
    if as_json:
        print(json.dumps(result, indent=1))
        return
    print(
        "error = trace - truth - common line (the time base's drift against the truth: "
        "{:+.2f} ppm), microseconds (absolute values)".format(drift * 1e6)
    )
    print(line("completion error (op end - completion)", result["completion_error_us"]))
    print(line("alignment error (its process's median)", result["alignment_error_us"]))
    for p, o in result["process_offsets_us"].items():
        print("  process {:<36} median {:>9.2f}".format(p, o))
    print(
        "collectives ending on a rank before their last rank began: {} of {}".format(
            broken_collectives, checked_collectives
        )
    )
    print("receives ending before their send began: {}".format(broken_messages))
    if over_time:
        print("alignment over time (each 100 ms of the run, against the first process):")
        for p, bins in over_time.items():
            print("  process {:<36} {}".format(p, " ".join("{}:{:+.1f}".format(b, v) for b, v in bins)))


BIN_NS = 100_000_000


def median(values):
    return sorted(values)[len(values) // 2]


def alignment_over_time(raw, done_at):
    """Per process but the first, [(bin start ms, µs)] as the docstring says."""
    start = min(done_at)
    binned = collections.defaultdict(lambda: collections.defaultdict(list))
    for (process, error), done in zip(raw, done_at):
        binned[process][(done - start) // BIN_NS].append(error)
    processes = sorted(binned)
    if len(processes) < 2:
        return {}
    first = {b: median(v) for b, v in binned[processes[0]].items()}
    result = {}
    for p in processes[1:]:
        diffs = {b: median(v) - first[b] for b, v in binned[p].items() if b in first}
        if not diffs:
            continue
        run = median(list(diffs.values()))
        result[p] = [(b * BIN_NS // 1_000_000, (d - run) / 1e3) for b, d in sorted(diffs.items())]
    return result


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--json"]
    if len(args) != 2:
        sys.exit(__doc__)
    main(args[0], args[1], "--json" in sys.argv[1:])
