#!/usr/bin/env bash
# Regenerates the replay corpus in tests/corpus/: nccl-sim jobs run with the plugin in
# record mode, each kept as its gzip-compressed recordings and what the plugin made of the
# original run (expected.json), which tests/replay.rs checks every replay against.
#
#   scripts/make-corpus.sh
#
# Builds nccl-sim, the plugin and the tool (debug), replaces tests/corpus/<entry>/ for each
# entry below and rewrites tests/corpus/README.md's table of what produced each.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"
cargo build -p nccl-sim -p nccl-profiler-scorep -p nccl-scorep
target="${CARGO_TARGET_DIR:-$repo_root/target}/debug"
nccl_sim="$target/nccl-sim"
plugin="$target/libnccl_profiler_scorep.so"
corpus="$repo_root/tests/corpus"
commit="$(git rev-parse --short HEAD)"
date="$(date -u +%Y-%m-%d)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# name | nccl-sim arguments (after `run --plugin <plugin>`)
entries=(
    "nccl-2.23-v1|--nccl 2.23 --ranks 2 --iterations 2 --scenario single --scenario group --scenario p2p"
    "nccl-2.27-v4|--nccl 2.27 --ranks 2 --iterations 2 --scenario single --scenario p2p --scenario net-plugin"
    "nccl-2.28-v5|--nccl 2.28 --ranks 2 --iterations 2 --scenario group --scenario graph --scenario split"
    "nccl-2.32-v7|--nccl 2.32 --ranks 2 --iterations 2"
    "nccl-2.32-pxn|--nccl 2.32 --procs 2 --pxn --iterations 2 --scenario single --scenario p2p"
)

table=""
for entry in "${entries[@]}"; do
    name="${entry%%|*}"
    args="${entry#*|}"
    run="$work/$name"
    echo "== $name: nccl-sim run $args"
    # shellcheck disable=SC2086
    NCCL_SCOREP_MODE=otf2,record NCCL_SCOREP_JSONL=1 NCCL_SCOREP_OUTPUT_DIR="$run" \
        NCCL_SCOREP_HOSTNAME=corpus \
        "$nccl_sim" run --plugin "$plugin" $args >/dev/null
    rm -rf "${corpus:?}/$name"
    mkdir -p "$corpus/$name"
    for recording in "$run"/recordings/*.ncclrec; do
        gzip -9 -n -c "$recording" >"$corpus/$name/$(basename "$recording").gz"
    done
    "$target/nccl-scorep" summary "$run" --json >"$work/$name.summary.json"
    python3 - "$run" "$work/$name.summary.json" >"$corpus/$name/expected.json" <<'PY'
# What the plugin made of the original run: the facts every replay must reproduce.
import collections, glob, json, sys
run, summary = sys.argv[1], json.load(open(sys.argv[2]))
kinds, cycles, comms = collections.Counter(), 0, 0
events = {}
for path in glob.glob(run + "/nccl-scorep-*.jsonl"):
    for line in open(path):
        record = json.loads(line)
        if record["type"] == "header":
            cycles += 1
        elif record["type"] == "comm":
            comms += 1
        elif record["type"] == "event":
            kinds[record["kind"]] += 1
            events[record["id"]] = record
parents = sum(1 for e in events.values() if e.get("parent") and "id" in e["parent"])
linked = sum(1 for e in events.values() if e.get("parent") and e["parent"].get("id") in events)
foreign = sum(1 for e in events.values() if e.get("parent") and "foreign_pid" in e["parent"])
groups = sum(1 for e in events.values() if e.get("parent_group") not in (None, "0x0"))
operations = sorted(
    ({k: op[k] for k in ("comm", "func", "kind", "nranks", "calls")} for op in summary["operations"]),
    key=lambda op: (op["comm"], op["func"]),
)
json.dump({
    "cycles": cycles,
    "comms": comms,
    "kinds": dict(sorted(kinds.items())),
    "parents": parents,
    "parents_linked": linked,
    "foreign_parents": foreign,
    "parent_groups": groups,
    "operations": operations,
}, sys.stdout, indent=1)
print()
PY
    size="$(du -k "$corpus/$name" | cut -f1)"
    table+="| \`$name\` | \`nccl-sim run $args\` | ${size} KiB |"$'\n'
done

cat >"$corpus/README.md" <<MD
# Replay corpus

Recordings of nccl-sim jobs (\`NCCL_SCOREP_MODE=otf2,record\`, see docs/record.md),
gzip-compressed, one file per process, and \`expected.json\`: what the plugin made of the
original run (event counts by kind, parent links, communicators, init/finalize cycles, the
summary's operations). \`tests/replay.rs\` replays every entry through the plugin and checks
the replay against it, validates the trace and reads its summary.

These are recordings of **nccl-sim**, our own model of NCCL, not of a real NCCL: a corpus of
real NCCL runs (recorded on a GPU machine) is still to be added.

Made by \`scripts/make-corpus.sh\` on $date from commit $commit (nccl-sim
$("$nccl_sim" --version | cut -d' ' -f2)), with \`NCCL_SCOREP_HOSTNAME=corpus\`:

| Entry | Command | Size |
|---|---|---|
$table
MD
echo "corpus written to $corpus"
