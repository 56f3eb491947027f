#!/usr/bin/env python3
"""Decode a Perfetto protobuf trace with Perfetto's own schema and print
what trace_processor would build from it, as one JSON object.

    python3 scripts/perfetto-summary.py FILE > summary.json

The schema is the `perfetto` package's `perfetto_trace_pb2` (PyPI:
`pip install perfetto==0.59.1`, which brings `protobuf`); nothing of it is
copied here. The rules applied are the ones trace_processor documents for
TrackEvent (docs/reference/synthetic-track-event.md, trace-packet-proto):

* interned names (event names, debug annotation names) are per packet
  sequence and valid from the packet that clears its incremental state;
  a packet that needs incremental state before it is cleared is an error;
* `trace_packet_defaults` give a sequence's track and timestamp clock;
* events are sorted by time (stably) and each track's BEGIN/END pair up
  as a stack: an END with nothing open is an error, a BEGIN left open is
  a slice that did not end (dur null);
* a field the schema does not know is an error (a wrong field number).

Exit status 1 with the errors listed when anything is wrong.
"""

import json
import math
import sys

try:
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb
except ImportError as e:  # the caller decides whether that is a skip
    print(f"perfetto-summary: cannot import Perfetto's schema: {e}", file=sys.stderr)
    sys.exit(2)
from google.protobuf import unknown_fields


def unknown(msg, path, errors):
    """Every field of `msg` (recursively) the schema does not know."""
    for f in unknown_fields.UnknownFieldSet(msg):
        errors.append(f"{path}: unknown field {f.field_number}")
    for fd, value in msg.ListFields():
        if fd.type != fd.TYPE_MESSAGE:
            continue
        repeated = fd.is_repeated if hasattr(fd, "is_repeated") else fd.label == fd.LABEL_REPEATED
        items = value if repeated else [value]
        for i, v in enumerate(items):
            unknown(v, f"{path}.{fd.name}[{i}]", errors)


def annotation_value(a, names, errors, where):
    kind = a.WhichOneof("value")
    if a.dict_entries:
        return {e.name: annotation_value(e, names, errors, where) for e in a.dict_entries}
    if a.array_values or kind is None:
        return [annotation_value(e, names, errors, where) for e in a.array_values]
    if kind == "string_value_iid":
        errors.append(f"{where}: interned string values are not written")
    v = getattr(a, kind)
    if isinstance(v, float) and not math.isfinite(v):
        # As tape show's JSON (and Rust) write them: JSON has no NaN.
        return "NaN" if math.isnan(v) else ("inf" if v > 0 else "-inf")
    return v


def finite(v):
    if math.isfinite(v):
        return v
    return "NaN" if math.isnan(v) else ("inf" if v > 0 else "-inf")


def args(annotations, names, errors, where):
    out = {}
    for a in annotations:
        if a.HasField("name_iid"):
            if a.name_iid not in names:
                errors.append(f"{where}: annotation name iid {a.name_iid} not interned")
                continue
            name = names[a.name_iid]
        else:
            name = a.name
        out[name] = annotation_value(a, names, errors, where)
    return out


def main(path):
    data = open(path, "rb").read()
    trace = pb.Trace()
    trace.ParseFromString(data)
    errors = []
    tracks = {}
    seqs = {}
    events = []
    clocks = []
    ftrace = []  # the kernel's events (ftrace's own, BOOTTIME ns)
    for i, p in enumerate(trace.packet):
        where = f"packet {i}"
        unknown(p, where, errors)
        sid = p.trusted_packet_sequence_id
        st = seqs.setdefault(sid, {"cleared": False, "names": {}, "args": {}, "defaults": None})
        if p.sequence_flags & 1 or p.incremental_state_cleared:
            st.update(cleared=True, names={}, args={}, defaults=None)
        if p.HasField("trace_packet_defaults"):
            st["defaults"] = p.trace_packet_defaults
        if p.sequence_flags & 2 and not st["cleared"]:
            errors.append(f"{where}: needs incremental state before sequence {sid} cleared it")
        if p.HasField("interned_data"):
            for n in p.interned_data.event_names:
                st["names"][n.iid] = n.name
            for n in p.interned_data.debug_annotation_names:
                st["args"][n.iid] = n.name
        if p.HasField("clock_snapshot"):
            clocks.append({
                "clocks": {c.clock_id: c.timestamp for c in p.clock_snapshot.clocks},
                "primary": p.clock_snapshot.primary_trace_clock,
            })
        if p.HasField("track_descriptor"):
            d = p.track_descriptor
            t = {"name": d.name, "parent": d.parent_uuid if d.HasField("parent_uuid") else None}
            if d.HasField("thread"):
                t.update(kind="thread", pid=d.thread.pid, tid=d.thread.tid, name=d.thread.thread_name)
            elif d.HasField("process"):
                t.update(kind="process", pid=d.process.pid, name=d.process.process_name)
            elif d.HasField("counter"):
                t["kind"] = "counter"
            else:
                t["kind"] = "track"
            tracks[d.uuid] = t
        if p.HasField("ftrace_events"):
            b = p.ftrace_events
            for fe in b.event:
                kind = fe.WhichOneof("event")
                e = {"ts": fe.timestamp, "cpu": b.cpu, "pid": fe.pid, "kind": kind}
                if kind == "sched_switch":
                    x = fe.sched_switch
                    e.update(prev_comm=x.prev_comm, prev_pid=x.prev_pid, prev_state=x.prev_state,
                             next_comm=x.next_comm, next_pid=x.next_pid)
                elif kind in ("sched_wakeup", "sched_waking"):
                    x = getattr(fe, kind)
                    e.update(comm=x.comm, woken=x.pid, target_cpu=x.target_cpu)
                ftrace.append(e)
        if p.HasField("track_event"):
            e = p.track_event
            defaults = st["defaults"]
            track = e.track_uuid if e.HasField("track_uuid") else (
                defaults.track_event_defaults.track_uuid if defaults else None)
            clock = p.timestamp_clock_id if p.HasField("timestamp_clock_id") else (
                defaults.timestamp_clock_id if defaults and defaults.HasField("timestamp_clock_id") else 6)
            name = None
            if e.HasField("name_iid"):
                name = st["names"].get(e.name_iid)
                if name is None:
                    errors.append(f"{where}: event name iid {e.name_iid} not interned")
            elif e.HasField("name"):
                name = e.name
            events.append({
                "i": i, "ts": p.timestamp, "clock": clock, "track": track,
                "type": pb.TrackEvent.Type.Name(e.type), "name": name,
                "args": args(e.debug_annotations, st["args"], errors, where),
                "flows": list(e.flow_ids),
                "counter": finite(e.double_counter_value) if e.HasField("double_counter_value") else (
                    e.counter_value if e.HasField("counter_value") else None),
            })
    for e in events:
        if e["track"] not in tracks:
            errors.append(f"packet {e['i']}: track {e['track']} not described")
    events.sort(key=lambda e: e["ts"])  # stable: file order within a time
    open_ = {}
    slices, instants, counters = [], [], []
    for e in events:
        if e["type"] == "TYPE_SLICE_BEGIN":
            s = {"track": e["track"], "name": e["name"], "ts": e["ts"], "dur": None,
                 "args": dict(e["args"]), "flows": e["flows"],
                 "depth": len(open_.get(e["track"], []))}
            open_.setdefault(e["track"], []).append(s)
            slices.append(s)
        elif e["type"] == "TYPE_SLICE_END":
            stack = open_.get(e["track"], [])
            if not stack:
                errors.append(f"packet {e['i']}: slice end with no slice open on track {e['track']}")
                continue
            s = stack.pop()
            s["dur"] = e["ts"] - s["ts"]
            s["args"].update(e["args"])
        elif e["type"] == "TYPE_INSTANT":
            instants.append({k: e[k] for k in ("track", "name", "ts", "args")})
        elif e["type"] == "TYPE_COUNTER":
            counters.append({k: e[k] for k in ("track", "ts", "counter")})
        else:
            errors.append(f"packet {e['i']}: event type {e['type']}")
    json.dump({
        "tracks": {str(k): v for k, v in tracks.items()},
        "clock_snapshots": clocks,
        "clocks_used": sorted({e["clock"] for e in events}),
        "sequences": len(seqs),
        "slices": slices, "instants": instants, "counters": counters,
        "ftrace": ftrace,
        "errors": errors,
    }, sys.stdout, indent=1)
    print()
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main(sys.argv[1])
