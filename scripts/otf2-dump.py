#!/usr/bin/python3
"""Dumps what an OTF2 archive says as one JSON document, through the `otf2` Python reader
(Debian package python3-otf2, for /usr/bin/python3). The tests assert on this dump; it is
also handy to look into a trace:

    /usr/bin/python3 scripts/otf2-dump.py run/parts/host.1234/traces.otf2 | jq .comms

Output: clock properties, locations, communicators (members by location name), every
Enter/Leave pair as an interval with its attributes, collective records, message records,
and `problems`: anything that breaks nesting or time order, or stays open at the end.
Timestamps are as the reader gives them (clock offsets applied: real-time nanoseconds).
"""

import json
import sys

import otf2


def attr_value(value):
    if hasattr(value, "name"):  # a string or other definition reference
        return value.name
    if isinstance(value, (int, float, str)):
        return value
    return str(value)


def attributes(event):
    if not event.attributes:
        return {}
    return {attr.name: attr_value(value) for attr, value in event.attributes.items()}


def location_key(location):
    return location.name


def main(path):
    out = {
        "locations": [],
        "comms": [],
        "intervals": [],
        "collectives": [],
        "messages": [],
        "problems": [],
        "event_counts": {},
    }
    with otf2.reader.open(path) as trace:
        defs = trace.definitions
        clock = defs.clock_properties
        out["clock"] = {
            "resolution": clock.timer_resolution,
            "offset": clock.global_offset,
            "length": clock.trace_length,
        }
        for location in defs.locations:
            out["locations"].append(
                {
                    "id": location._ref,
                    "name": location.name,
                    "type": str(location.type).split(".")[-1],
                    "group": location.group.name,
                    "group_type": str(location.group.location_group_type).split(".")[-1],
                    "events": location.number_of_events,
                }
            )
        for comm in defs.comms:
            out["comms"].append(
                {
                    "name": comm.name,
                    "paradigm": str(comm.group.paradigm).split(".")[-1],
                    "members": [m.name for m in comm.group.members],
                }
            )
        out["regions"] = sorted({region.name for region in defs.regions})
        stacks = {}
        last_time = {}
        open_collective = {}
        for location, event in trace.events:
            name = location_key(location)
            kind = type(event).__name__
            out["event_counts"][kind] = out["event_counts"].get(kind, 0) + 1
            if event.time < last_time.get(name, 0):
                out["problems"].append(f"{name}: time goes back at {event.time}")
            last_time[name] = event.time
            stack = stacks.setdefault(name, [])
            if kind == "Enter":
                stack.append((event.region.name, event.time, attributes(event)))
            elif kind == "Leave":
                if not stack or stack[-1][0] != event.region.name:
                    out["problems"].append(
                        f"{name}: Leave {event.region.name} at {event.time} does not match "
                        f"{stack[-1][0] if stack else 'nothing open'}"
                    )
                    continue
                region, start, attrs = stack.pop()
                out["intervals"].append(
                    {
                        "loc": name,
                        "region": region,
                        "start": start,
                        "end": event.time,
                        "depth": len(stack),
                        "attrs": attrs,
                    }
                )
            elif kind == "MpiCollectiveBegin":
                open_collective[name] = event.time
            elif kind == "MpiCollectiveEnd":
                if not stack:
                    out["problems"].append(f"{name}: collective outside a region")
                out["collectives"].append(
                    {
                        "loc": name,
                        "begin": open_collective.pop(name, None),
                        "end": event.time,
                        "op": str(event.collective_op).split(".")[-1],
                        "comm": event.communicator.name,
                        "root": event.root,
                        "sent": event.size_sent,
                        "received": event.size_received,
                    }
                )
            elif kind in ("MpiSend", "MpiRecv"):
                out["messages"].append(
                    {
                        "loc": name,
                        "kind": "send" if kind == "MpiSend" else "recv",
                        "time": event.time,
                        "peer": event.receiver if kind == "MpiSend" else event.sender,
                        "comm": event.communicator.name,
                        "tag": event.msg_tag,
                        "bytes": event.msg_length,
                    }
                )
        for name, stack in stacks.items():
            for region, start, _ in stack:
                out["problems"].append(f"{name}: {region} entered at {start} never left")
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: otf2-dump.py ARCHIVE/traces.otf2")
    main(sys.argv[1])
