# package_t.py: the memtrace package over this build's libmemtrace, on the host
# device: nested Python functions allocate through memtrace's caching allocator in
# the main thread and in a second thread while a third holds the GIL; the snapshot
# names each thread's own functions, files and lines in order, one stack per call
# site. Prints TAP (run by run-t.sh).
import ctypes
import os
import re
import subprocess
import sys
import tempfile
import threading

import memtrace

N = 40
results = []


def ok(cond, text):
    results.append((bool(cond), text))


def line_of(mark):
    with open(__file__) as f:
        for i, text in enumerate(f, 1):
            if text.rstrip().endswith("# L:" + mark):
                return i
    raise AssertionError(mark)


lib = ctypes.CDLL(memtrace.library_path())
lib.memtrace_device_open_host.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint64]
lib.memtrace_alloc_create.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p]
lib.memtrace_alloc_malloc.argtypes = [
    ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint64)]
lib.memtrace_alloc_free.argtypes = [ctypes.c_void_p, ctypes.c_uint64]
dev, alloc = ctypes.c_void_p(), ctypes.c_void_p()
assert lib.memtrace_device_open_host(ctypes.byref(dev), 1 << 30) == 0
assert lib.memtrace_alloc_create(ctypes.byref(alloc), dev) == 0


def host_alloc(size, keep):
    addr = ctypes.c_uint64()
    if lib.memtrace_alloc_malloc(alloc, size, None, ctypes.byref(addr)) != 0:  # L:alloc
        raise RuntimeError("memtrace_alloc_malloc failed")
    keep.append(addr.value)


def main_leaf(keep):
    host_alloc(1 << 20, keep)  # L:main_leaf


@memtrace.annotate("main_step")
def main_outer(keep):
    with memtrace.category("weights"):
        for _ in range(N):
            main_leaf(keep)  # L:main_outer


def worker_outer(keep):
    for _ in range(N):
        host_alloc(3 << 20, keep)  # L:worker_outer


def hog(stop):
    while not stop.is_set():
        pass


ok(memtrace.library_path() == os.environ["MEMTRACE_LIBRARY"], "loads the library it is told to")
try:
    memtrace.record_memory_history(stacks="mixed")
    ok(False, "an unknown stacks kind is refused")
except ValueError as e:
    ok("all, native, python" in str(e), "an unknown stacks kind is refused: %s" % e)
try:
    memtrace.category("").__enter__()
    ok(False, "an empty category name is refused")
except ValueError:
    ok(True, "an empty category name is refused")

memtrace.record_memory_history(context="all", stacks="all", max_entries=0)
sys.setswitchinterval(0.02)
stop = threading.Event()
hogger = threading.Thread(target=hog, args=(stop,))
hogger.start()
kept_main, kept_worker = [], []
worker = threading.Thread(target=worker_outer, args=(kept_worker,))
worker.start()
main_outer(kept_main)  # L:module
worker.join()
stop.set()
hogger.join()

out_dir = tempfile.mkdtemp(prefix="mt-python-")
path = os.path.join(out_dir, "package.memtrace")
memtrace.dump_snapshot(path)
for a in kept_main + kept_worker:
    lib.memtrace_alloc_free(alloc, a)
memtrace.record_memory_history(context=None, stacks=None)
try:
    memtrace.dump_snapshot(os.path.join(out_dir, "no", "such", "dir.memtrace"))
    ok(False, "a snapshot to a missing folder raises MemtraceError")
except memtrace.MemtraceError as e:
    ok("dump_snapshot" in str(e), "a snapshot to a missing folder raises MemtraceError: %s" % e)

summary = subprocess.run(
    [os.environ["MEMTRACE_CLI"], "summary", "--top", "0", "--depth", "0", path],
    stdout=subprocess.PIPE, universal_newlines=True).stdout
os.unlink(path)
os.rmdir(out_dir)
blocks = re.split(r"\n *\d+\. ", summary)[1:]
me = __file__  # as the interpreter names it in co_filename


def frames_at(block, names):
    where = []
    for name, mark in names:
        text = "%s at %s:%d\n" % (name, me, line_of(mark))
        where.append(block.find(text))
    return where


main = [b for b in blocks if "main_leaf at" in b]
worker = [b for b in blocks if "worker_outer at" in b]
ok(len(main) == 1 and "in %d allocations" % N in main[0],
   "the main thread's %d blocks share one stack" % N)
ok(len(worker) == 1 and "in %d allocations" % N in worker[0],
   "the second thread's %d blocks share one stack" % N)
w = frames_at(main[0] if main else "", [("host_alloc", "alloc"), ("main_leaf", "main_leaf"),
                                        ("main_outer", "main_outer"), ("<module>", "module")])
ok(0 < w[0] < w[1] < w[2] < w[3] and "#0  " in main[0] and " at " not in main[0].split("\n")[1],
   "main thread: a native frame, then host_alloc, main_leaf, main_outer, <module> (%s)" % w)
w = frames_at(worker[0] if worker else "", [("host_alloc", "alloc"),
                                            ("worker_outer", "worker_outer")])
ok(0 < w[0] < w[1] and "main_" not in (worker[0] if worker else "main_"),
   "second thread: host_alloc, worker_outer, and none of the main thread's frames (%s)" % w)
m = re.search(r"\nannotations +(\d+)", summary)
ok(m is not None and m.group(1) == "2", "the annotate decorator recorded its 2 ends")

try:
    memtrace.use_with_torch()
    import torch  # noqa: F401  (a CUDA build: the allocator is installed)
    ok(True, "use_with_torch installs the allocator where torch has CUDA")
except memtrace.MemtraceError as e:
    ok("PyTorch" in str(e), "use_with_torch without a CUDA PyTorch: %s" % e)

print("1..%d" % len(results))
for i, (good, text) in enumerate(results, 1):
    print("%s %d - %s" % ("ok" if good else "not ok", i, text))
sys.exit(0 if all(g for g, _ in results) else 1)
