#!/usr/bin/env python3
"""gen_pickle.py: a PyTorch memory snapshot pickle of N trace entries, for the import bench.

    bench/gen_pickle.py SEED.pickle N OUT.pickle

The entries repeat SEED's device trace (a real snapshot), shifted in address and time
on each pass so that every allocation is new; frame dicts are the same objects as in
SEED, as torch.cuda.memory._snapshot() shares them, so the pickle memoizes them like a
real one. Segments are SEED's. Written with pickle protocol 4, as torch dumps it.
"""
import pickle
import sys


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: gen_pickle.py SEED.pickle N OUT.pickle")
    with open(sys.argv[1], "rb") as f:
        seed = pickle.load(f)
    want = int(sys.argv[2])
    trace = seed["device_traces"][0]
    if not trace:
        sys.exit("gen_pickle.py: the seed's first device trace is empty")
    t0 = trace[0]["time_us"]
    span = trace[-1]["time_us"] - t0 + 1
    out = []
    k = 0
    while len(out) < want:
        # A pass moves every address above the seed's highest segment end.
        shift = k * (1 << 40)
        for e in trace:
            if len(out) == want:
                break
            n = dict(e)
            n["addr"] = e["addr"] + shift
            n["time_us"] = e["time_us"] + k * span
            if "frames" in e:
                n["frames"] = list(e["frames"])  # a list per entry, its dicts shared
            out.append(n)
        k += 1
    snap = dict(seed)
    snap["device_traces"] = [out]
    with open(sys.argv[3], "wb") as f:
        pickle.dump(snap, f, protocol=4)


main()
