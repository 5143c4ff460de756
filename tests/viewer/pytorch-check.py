#!/usr/bin/env python3
"""Independent checks of memtrace's exports with Python's own json and pickle.

  pytorch-check.py snapshot FILE     FILE is export-t's known file as a PyTorch
                                     snapshot (.pickle or .json): schema and figures
  pytorch-check.py perfetto FILE     the same file as a Chrome trace: counter values
  pytorch-check.py compare ORIG NEW  NEW (re-exported) holds ORIG's segments, blocks
                                     and trace entries
Exit status 0 when every check holds; failures are printed one per line."""
import json
import pickle
import pickletools
import sys

fails = []


def check(cond, what):
    if not cond:
        fails.append(what)


def load(path):
    with open(path, "rb") as f:
        head = f.read(1)
        f.seek(0)
        if head == b"\x80":
            return pickle.load(f)
        return json.load(f)


# The opcodes MemoryViz's own pickle reader (torch/utils/viz/MemoryViz.js) knows,
# protocols 2 to 4: a pickle for it may use no other.
MEMORYVIZ_OPS = {"PROTO", "FRAME", "STOP", "MARK", "EMPTY_DICT", "EMPTY_LIST",
                 "EMPTY_TUPLE", "DICT", "LIST", "TUPLE", "TUPLE1", "TUPLE2", "TUPLE3",
                 "SETITEM", "SETITEMS", "APPEND", "APPENDS", "NONE", "NEWTRUE",
                 "NEWFALSE", "BININT", "BININT1", "BININT2", "LONG1", "BINFLOAT",
                 "SHORT_BINUNICODE", "BINUNICODE", "MEMOIZE", "BINPUT", "LONG_BINPUT",
                 "BINGET", "LONG_BINGET"}


def memoryviz_opcodes(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:1] != b"\x80":
        return
    check(data[1] <= 4, "protocol %d: MemoryViz reads 2 to 4" % data[1])
    used = {op.name for op, _, _ in pickletools.genops(data)}
    check(used <= MEMORYVIZ_OPS, "opcodes MemoryViz cannot read: %s" % sorted(used - MEMORYVIZ_OPS))


def norm(x):
    if isinstance(x, (list, tuple)):
        return [norm(y) for y in x]
    if isinstance(x, dict):
        return {k: norm(v) for k, v in x.items()}
    return x


WALL = 10**18 - 1000  # the file's wall clock minus its monotonic origin


def us(t_ns):
    return (WALL + t_ns) // 1000


F_ALLOC = {"filename": "model.py", "line": 10, "name": "alloc_fn"}
F_STEP = {"filename": "model.py", "line": 20, "name": "train_step"}
F_LIB = {"filename": "libtorch.so", "line": 0, "name": "libtorch.so+0x40"}


def snapshot(path):
    memoryviz_opcodes(path)
    s = load(path)
    check(isinstance(s, dict), "top level is a dict")
    for key in ("segments", "device_traces", "allocator_settings", "external_annotations"):
        check(key in s, "key %s present" % key)
    check(s.get("allocator_settings") == {"max_split_size_mb": 64}, "allocator_settings kept")
    segs = s["segments"]
    check(len(segs) == 2, "2 segments, got %d" % len(segs))
    seg_keys = {"device", "address", "total_size", "allocated_size", "active_size",
                "requested_size", "stream", "segment_type", "segment_pool_id",
                "is_expandable", "frames", "blocks"}
    for g in segs:
        check(set(g) == seg_keys, "segment keys %s" % sorted(g))
        addr = g["address"]
        for b in g["blocks"]:  # contiguous, as MemoryViz places them
            check(set(b) == {"address", "size", "requested_size", "state", "frames"},
                  "block keys %s" % sorted(b))
            check(b["address"] == addr, "block at %#x follows the previous" % b["address"])
            check(b["state"] in ("active_allocated", "active_pending_free", "inactive"),
                  "block state %s" % b["state"])
            addr += b["size"]
        check(addr == g["address"] + g["total_size"], "blocks cover the segment")
    g0 = [g for g in segs if g["device"] == 0][0]
    g1 = [g for g in segs if g["device"] == 1][0]
    check(g0["address"] == 0x100000 and g0["total_size"] == 2097152, "segment 0 figures")
    check(g0["allocated_size"] == 512 and g0["segment_type"] == "small", "segment 0 sizes/type")
    check([(b["size"], b["state"]) for b in g0["blocks"]] ==
          [(1024, "inactive"), (512, "active_allocated"), (2097152 - 1536, "inactive")],
          "segment 0 blocks %s" % [(b["size"], b["state"]) for b in g0["blocks"]])
    check(g0["blocks"][1]["frames"] == [F_STEP], "block frames")
    check(g0["frames"] == [F_LIB], "segment frames %s" % g0["frames"])
    check(norm(g1["segment_pool_id"]) == [0, 3], "user pool id %s" % (g1["segment_pool_id"],))
    check(g1["is_expandable"] is True and g1["segment_type"] == "large", "segment 1 flags")
    check([(b["size"], b["state"]) for b in g1["blocks"]] ==
          [(4096, "active_pending_free"), (2097152 - 4096, "inactive")], "segment 1 blocks")
    tr = s["device_traces"]
    check(len(tr) == 2, "2 device traces, got %d" % len(tr))
    check([e["action"] for e in tr[0]] ==
          ["segment_alloc", "alloc", "alloc", "free_requested", "free_completed", "snapshot"],
          "device 0 actions %s" % [e["action"] for e in tr[0]])
    check([e["action"] for e in tr[1]] == ["segment_alloc", "alloc", "oom"],
          "device 1 actions %s" % [e["action"] for e in tr[1]])
    for d in tr:
        for e in d:
            want = {"action", "size", "stream", "time_us"}
            want |= {"device_free"} if e["action"] == "oom" else {"addr"}
            want |= set() if e["action"] == "snapshot" else {"frames"}
            check(set(e) == want, "entry keys %s" % sorted(e))
    a = tr[0][1]
    check(a["addr"] == 0x100000 and a["size"] == 1024 and a["time_us"] == us(3000),
          "alloc figures %s" % {k: a[k] for k in a if k != "frames"})
    check(a["frames"] == [F_ALLOC, F_STEP], "alloc frames %s" % a["frames"])
    check(tr[0][0]["frames"] == [F_LIB], "segment_alloc frames")
    o = tr[1][2]
    check(o["size"] == 1 << 30 and o["device_free"] == 12345 and o["time_us"] == us(13000),
          "oom figures")
    an = s["external_annotations"]
    check([(x["name"], x["stage"], x["device"], x["time_us"]) for x in an] ==
          [("phase1", "START", 0, us(10000)), ("phase1", "END", 0, us(12000))],
          "annotations %s" % an)


def perfetto(path):
    with open(path) as f:
        t = json.load(f)
    ev = t["traceEvents"]
    counters = {}
    for e in ev:
        if e["ph"] == "C":
            counters.setdefault(e["pid"], []).append(e["args"])
    # pid = device + 1, host memory is pid 0
    check(counters.get(1, [None])[-1] == {"allocated": 512, "reserved": 2097152,
                                          "used": 3000000}, "device 0 last %s" % counters.get(1))
    check([c["allocated"] for c in counters.get(1, [])] == [0, 1024, 1536, 512, 512],
          "device 0 allocated series %s" % counters.get(1))
    check(counters.get(2, [None])[-1] == {"allocated": 4096, "reserved": 2097152, "used": 0},
          "device 1 last %s" % counters.get(2))
    check(counters.get(0, [None])[-1] == {"allocated": 64, "reserved": 0, "used": 0},
          "host last %s" % counters.get(0))
    b = [e for e in ev if e["ph"] == "b"]
    en = [e for e in ev if e["ph"] == "e"]
    check(len(b) == 4 and len(en) == 4, "4 block slices begun and ended: %d %d" % (len(b), len(en)))
    check(sorted(e["id"] for e in b) == sorted(e["id"] for e in en), "slices pair by id")
    # named by the stack's innermost Python frame, with its file and line
    check(b[0]["name"] == "alloc_fn (model.py:10)" and b[0]["args"]["size"] == 1024,
          "first slice %s" % b[0])
    check(len([e for e in ev if e["ph"] in "BE"]) == 2, "annotation begin and end")
    check(len([e for e in ev if e["ph"] == "i" and e["name"] == "oom"]) == 1, "one oom instant")


def compare(orig, new):
    memoryviz_opcodes(new)
    a, b = load(orig), load(new)
    check(norm(a["segments"]) == norm(b["segments"]), "segments and blocks differ")
    ta, tb = a["device_traces"], b["device_traces"]
    check(len(ta) == len(tb), "device trace count %d != %d" % (len(ta), len(tb)))
    keys = ("action", "addr", "size", "stream", "frames", "time_us")
    for d, (x, y) in enumerate(zip(ta, tb)):
        check(len(x) == len(y), "device %d: %d entries != %d" % (d, len(x), len(y)))
        for i, (e, f) in enumerate(zip(x, y)):
            if [e.get(k) for k in keys] != [f.get(k) for k in keys]:
                check(False, "device %d entry %d differs" % (d, i))
                break


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    {"snapshot": lambda: snapshot(sys.argv[2]), "perfetto": lambda: perfetto(sys.argv[2]),
     "compare": lambda: compare(sys.argv[2], sys.argv[3])}[sys.argv[1]]()
    for f in fails:
        print("check failed: " + f)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
