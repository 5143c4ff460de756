# python_prog.py: allocations through the fake libcuda from nested Python
# functions, for tests/interpose/python-t. Modes: "threads" (the main thread and a
# second Python thread allocate while a third holds the GIL in a busy loop, and a
# pure C thread allocates; then a forked child allocates), "nodevice" (never
# touches a device). The test finds the lines it checks by their "# L:" marks.
import ctypes
import os
import sys
import threading

ITERS = int(os.environ.get("PYPROG_ITERS", "200"))

if sys.argv[1] == "nodevice":
    print("S %d" % sum(i * i for i in range(100000)))
    sys.exit(0)

cu = ctypes.CDLL("libcuda.so.1")
helper = ctypes.CDLL(os.environ["PYPROG_HELPER"])
helper.pyhelper_c_thread.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
cu.cuInit(0)
dev = ctypes.c_int()
cu.cuDeviceGet(ctypes.byref(dev), 0)
ctx = ctypes.c_void_p()
cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev)


def alloc_free(n):
    p = ctypes.c_uint64()
    if cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(n)) != 0:  # L:alloc
        raise RuntimeError("cuMemAlloc_v2 failed")
    cu.cuMemFree_v2(p)


def main_leaf(n):
    alloc_free(n)  # L:main_leaf


def main_mid(n):
    main_leaf(n)  # L:main_mid


def main_outer(iters):
    for _ in range(iters):
        main_mid(4096)  # L:main_outer


def worker_leaf(n):
    alloc_free(n)  # L:worker_leaf


def worker_outer(iters):
    cu.cuCtxSetCurrent(ctx)
    for _ in range(iters):
        worker_leaf(8192)  # L:worker_outer


def hog(stop):
    x = 0
    while not stop.is_set():
        x += 1


sys.setswitchinterval(0.02)  # the hog keeps the GIL 20 ms at a time
cu.cuCtxSetCurrent(ctx)
stop = threading.Event()
hogger = threading.Thread(target=hog, args=(stop,))
hogger.start()
worker = threading.Thread(target=worker_outer, args=(ITERS,))
worker.start()
main_outer(ITERS)  # L:module
print("C %d" % helper.pyhelper_c_thread(ctx, ITERS, 12288))
worker.join()
stop.set()
hogger.join()

# join() returns when a thread's Python state is gone; the thread then still ends
# in the C library, which frees its stack and TLS. Under a sanitizer whose
# allocator has no fork handlers, a child forked then inherits its allocator's lock
# held and hangs at its first malloc: with PYPROG_WAIT_THREADS=1, fork only once the
# kernel has no such thread left.
if os.environ.get("PYPROG_WAIT_THREADS") == "1":
    import time
    gone = {hogger.native_id, worker.native_id}
    for _ in range(1000):
        if not gone & {int(t) for t in os.listdir("/proc/self/task")}:
            break
        time.sleep(0.01)

pid = os.fork()
if pid == 0:
    main_outer(3)
    sys.exit(0)
_, status = os.waitpid(pid, 0)
print("F %d" % status)
print("T %d" % ITERS)
