#!/usr/bin/env python3
"""Reads a .cubex file with pycubexr and checks it against a JSON description of what was
written: metric tree, call tree, system tree and every value.

    read_cube.py CUBEX EXPECTED_JSON

Exits with status 1 and a message on the first difference, and prints one line of
counts when everything agrees.
"""
import json
import sys
import tarfile
import xml.etree.ElementTree as ET

from pycubexr import CubexParser


def fail(message):
    print(f"MISMATCH: {message}", file=sys.stderr)
    sys.exit(1)


def same(what, got, want):
    if got != want:
        fail(f"{what}: read {got!r}, expected {want!r}")


def main(cubex_path, expected_path):
    with open(expected_path, encoding="utf-8") as f:
        want = json.load(f)

    with CubexParser(cubex_path) as cube:
        # Metric tree: every metric with its definition and its parent, in file order.
        got_metrics = []

        def walk_metrics(metrics, parent):
            for m in metrics:
                got_metrics.append({
                    "name": m.name,
                    "display": m.display_name,
                    "unit": m.units,
                    "dtype": m.data_type,
                    "kind": m.metric_type,
                    "description": m.description,
                    "url": m.url,
                    "parent": parent,
                })
                walk_metrics(m.childs, m.name)

        walk_metrics(cube.get_metrics(), None)
        same("metric tree", got_metrics, want["metrics"])

        # Call tree: each cnode by the path of region names from its root.
        paths = {}
        got_cnodes = []

        def walk_cnodes(cnode, prefix):
            path = f"{prefix}/{cnode.region.name}" if prefix else cnode.region.name
            if path in paths:
                fail(f"two cnodes with path {path}")
            paths[path] = cnode
            got_cnodes.append({
                "path": path,
                "region": cnode.region.name,
                "paradigm": cnode.region.paradigm,
                "role": cnode.region.role,
                "parameters": cnode.parameters,
            })
            for child in cnode.get_children():
                walk_cnodes(child, path)

        for root in cube.get_root_cnodes():
            walk_cnodes(root, "")
        same("call tree", got_cnodes, want["cnodes"])

        # System tree: locations in column order, with their groups and nodes.
        root_stn = cube._anchor_result.system_tree_nodes[0]
        got_stns = []

        def walk_stns(node, parent):
            got_stns.append({"name": node.name, "parent": parent})
            for child in node._system_tree_node_children:
                walk_stns(child, node.name)

        walk_stns(root_stn, None)
        same("system tree nodes", got_stns,
             [{"name": s["name"], "parent": s["parent"]} for s in want["system_tree_nodes"]])
        got_locations = []
        for group in root_stn.all_location_groups():
            for loc in group.all_locations():
                got_locations.append({
                    "name": loc.name,
                    "type": loc.type,
                    "rank": int(loc.rank),
                    "group": group.name,
                    "group_type": group.type,
                    "group_rank": int(group.rank),
                })
        same("locations", got_locations, want["locations"])
        locations = cube.get_locations()
        same("location ids", [loc.id for loc in locations], list(range(len(locations))))

        # Values: every (metric, cnode, location), unset ones read as zero.
        expected = {}
        for v in want["values"]:
            expected[(v["metric"], v["path"], v["location"])] = v["value"]
        names = [loc["name"] for loc in want["locations"]]
        checked = 0
        for m in cube.all_metrics():
            values = cube.get_metric_values(m)
            for path, cnode in paths.items():
                row = values.cnode_values(cnode)
                same(f"{m.name} at {path}: number of locations", len(row), len(names))
                for i, name in enumerate(names):
                    want_value = expected.get((m.name, path, name), 0)
                    same(f"{m.name} at {path} on {name}", row[i].item(), want_value)
                    checked += 1

                # The other flavour along the call tree, as pycubexr computes it from the
                # stored one: inclusive = own + subtree of children, exclusive = own - children.
                def subtree(p):
                    return [q for q in paths if q == p or q.startswith(p + "/")]

                def children(p):
                    return [q for q in paths if q.startswith(p + "/") and "/" not in q[len(p) + 1:]]

                if m.metric_type == "EXCLUSIVE":
                    other = values.cnode_values(cnode, convert_to_inclusive=True)
                    for i, name in enumerate(names):
                        total = sum(expected.get((m.name, q, name), 0) for q in subtree(path))
                        same(f"inclusive {m.name} at {path} on {name}", other[i].item(), total)
                else:
                    other = values.cnode_values(cnode, convert_to_exclusive=True)
                    for i, name in enumerate(names):
                        own = expected.get((m.name, path, name), 0)
                        own -= sum(expected.get((m.name, q, name), 0) for q in children(path))
                        same(f"exclusive {m.name} at {path} on {name}", other[i].item(), own)

    # What pycubexr does not expose: the system-tree node classes, the cube attributes.
    with tarfile.open(cubex_path) as tar:
        anchor = ET.parse(tar.extractfile("anchor.xml")).getroot()
    classes = [(n.findtext("name"), n.findtext("class")) for n in anchor.iter("systemtreenode")]
    same("system tree classes", classes,
         [(s["name"], s["class"]) for s in want["system_tree_nodes"]])
    attrs = {a.get("key"): a.get("value") for a in anchor.findall("attr")}
    for key, value in want["attributes"].items():
        same(f"attribute {key}", attrs.get(key), value)

    print(f"pycubexr read {len(got_metrics)} metrics, {len(got_cnodes)} cnodes, "
          f"{len(got_locations)} locations and checked {checked} values")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
