#!/usr/bin/env python3
"""Dumps a profile.cubex as JSON through pycubexr (a reader nobody here wrote), for the
profile tests to assert on:

    dump_profile.py PROFILE.cubex

Output: the metric tree (name, unit, type, kind, parent), the call tree (each cnode with
its region path and parameters), the locations in column order (name, type, process
name and rank), and every non-zero value as stored, per metric: [cnode, location, value].
"""
import json
import sys

from pycubexr import CubexParser


def main(path):
    out = {"metrics": [], "cnodes": [], "locations": [], "values": {}}
    with CubexParser(path) as cube:
        def walk_metrics(metrics, parent):
            for m in metrics:
                out["metrics"].append({
                    "name": m.name,
                    "display": m.display_name,
                    "unit": m.units,
                    "dtype": m.data_type,
                    "kind": m.metric_type,
                    "parent": parent,
                })
                walk_metrics(m.childs, m.name)

        walk_metrics(cube.get_metrics(), None)

        cnodes = []

        def walk_cnodes(cnode, path, parent):
            here = path + [cnode.region.name]
            cnodes.append(cnode)
            out["cnodes"].append({
                "id": cnode.id,
                "path": here,
                "parameters": dict(cnode.parameters),
                "parent": parent,
            })
            for child in cnode.get_children():
                walk_cnodes(child, here, cnode.id)

        for root in cube.get_root_cnodes():
            walk_cnodes(root, [], None)

        root_stn = cube._anchor_result.system_tree_nodes[0]
        for group in root_stn.all_location_groups():
            for loc in group.all_locations():
                out["locations"].append({
                    "name": loc.name,
                    "type": loc.type,
                    "process": group.name,
                    "process_rank": int(group.rank),
                })

        for m in cube.all_metrics():
            rows = []
            try:
                values = cube.get_metric_values(m)
            except Exception:  # a metric without values
                continue
            for cnode in cnodes:
                try:
                    row = values.cnode_values(cnode)
                except Exception:
                    continue
                for i, v in enumerate(row):
                    # Score-P's minimum and maximum metrics come as objects of their own.
                    if not hasattr(v, "item"):
                        continue
                    v = v.item()
                    if v != 0:
                        rows.append([cnode.id, i, v])
            out["values"][m.name] = rows
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
