#!/usr/bin/python3
"""Measures how far the times of a trace lie from nccl-sim's ground truth, for
docs/fidelity.md. Run by scripts/measure-fidelity.sh, or by hand:

    /usr/bin/python3 scripts/fidelity-errors.py RUN/traces.otf2 TRUTH_DIR

TRUTH_DIR holds the `truth-<pid>.jsonl` files of `nccl-sim run --truth-dir` (one host:
one or more processes of one communicator; operations are matched by communicator rank,
function and sequence number). Each operation's time is taken back to CLOCK_MONOTONIC
exactly, by its own `nccl.complete_ns`. Prints, per kind of time, the error (trace −
truth) in microseconds as percentiles; an operation's end is compared with the moment the
GPU finished it where its kernel channels are in the trace, with the moment the host knew
it complete otherwise; and how many ended before the GPU finished.
"""

import glob
import json
import os
import subprocess
import sys

DUMP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "otf2-dump.py")


def percentiles(values):
    values = sorted(values)
    if not values:
        return "no values"
    pick = lambda q: values[min(len(values) - 1, int(q * len(values)))]
    return "n={:<5} min {:>9.2f}  p50 {:>9.2f}  p90 {:>9.2f}  p99 {:>9.2f}  max {:>9.2f}".format(
        len(values),
        values[0] / 1e3,
        pick(0.5) / 1e3,
        pick(0.9) / 1e3,
        pick(0.99) / 1e3,
        values[-1] / 1e3,
    )


def main(anchor, truth_dir):
    dump = json.loads(subprocess.check_output(["/usr/bin/python3", DUMP, anchor]))
    truth = {}
    for path in glob.glob(os.path.join(truth_dir, "truth-*.jsonl")):
        for line in open(path):
            t = json.loads(line)
            k = (t["rank"], t["func"], t["seq"])
            if k in truth:
                # Operations are matched by rank, function and sequence number: a second
                # communicator or scenario on a rank would be matched with the wrong truth.
                sys.exit(f"{path}: rank {k[0]}'s {k[1]} {k[2]} is in the truth twice; this "
                         "script compares jobs with one communicator per rank and one scenario")
            truth[k] = t

    def key(i):
        a = i["attrs"]
        return (a.get("nccl.rank"), a.get("nccl.func"), a.get("nccl.seq"))

    intervals = dump["intervals"]
    ops = [
        i
        for i in intervals
        if i["loc"].endswith(" ops") and "nccl.complete_ns" in i["attrs"]
    ]
    # Trace time = CLOCK_MONOTONIC + its location's clock offset: per operation, exact.
    offset_of = {key(op): op["end"] - op["attrs"]["nccl.complete_ns"] for op in ops}
    median_offsets = sorted(offset_of.values())
    offset = median_offsets[len(median_offsets) // 2]
    gpu_timed = {
        key(i)
        for i in intervals
        if i["region"].endswith(" kernel") and "nccl.gpu_time_rejected" not in i["attrs"]
    }

    errors = {
        "API call start (ncclAllReduce) - API call": [],
        "op begin - GPU start": [],
        "op end - GPU end (kernel channels in the trace)": [],
        "op end - host completion (without them)": [],
        "kernel channel start - GPU start": [],
        "kernel channel end - GPU end": [],
        "stated GPU clock error bound": [],
    }
    within = 0
    kernels = 0
    early = 0
    for op in ops:
        t = truth.get(key(op))
        if t is None:
            continue
        off = offset_of[key(op)]
        errors["op begin - GPU start"].append(op["start"] - off - t["gpu_start_ns"])
        end = op["end"] - off
        if key(op) in gpu_timed:
            errors["op end - GPU end (kernel channels in the trace)"].append(end - t["gpu_stop_ns"])
        else:
            errors["op end - host completion (without them)"].append(end - t["completion_ns"])
        early += end < t["gpu_stop_ns"]
    for i in intervals:
        if not i["region"].endswith(" kernel"):
            continue
        t = truth.get(key(i))
        if t is None or "nccl.gpu_time_rejected" in i["attrs"]:
            continue
        channel = i["attrs"]["nccl.channel"]
        # nccl-sim's channels start 150 ns apart and end 100 ns apart.
        start = t["gpu_start_ns"] + channel * 150
        stop = max(t["gpu_stop_ns"] - channel * 100, start + 1)
        off = offset_of.get(key(i), offset)
        e_start = i["start"] - off - start
        e_stop = i["end"] - off - stop
        errors["kernel channel start - GPU start"].append(e_start)
        errors["kernel channel end - GPU end"].append(e_stop)
        bound = i["attrs"].get("nccl.gpu_clock_error_ns")
        if bound is not None:
            errors["stated GPU clock error bound"].append(bound)
            kernels += 1
            # Never early; late by at most the bound (1 µs of clock-reading noise).
            if all(-1000 <= e <= bound + 1000 for e in (e_start, e_stop)):
                within += 1
    api = [i for i in intervals if i["region"] == "ncclAllReduce"]
    # API calls carry no sequence number: match them per rank in call order.
    by_rank = {}
    for i in sorted(api, key=lambda i: i["start"]):
        by_rank.setdefault(i["attrs"].get("nccl.rank"), []).append(i)
    for rank, calls in by_rank.items():
        truths = sorted(
            (t for (r, f, _), t in truth.items() if r == rank and f == "AllReduce"),
            key=lambda t: t["seq"],
        )
        for i, t in zip(calls, truths):
            errors["API call start (ncclAllReduce) - API call"].append(
                i["start"] - offset_of.get((rank, "AllReduce", t["seq"]), offset)
                - t["enqueue_start_ns"]
            )
    print("error = trace - truth, microseconds")
    for name, values in errors.items():
        print(f"{name:<49} {percentiles(values)}")
    print(f"kernel channel times within their stated bound: {within} of {kernels}")
    print(f"operations ending before the GPU finished them: {early} of {len(ops)}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
