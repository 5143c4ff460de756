"""memtrace from Python: record device memory with Python and native stacks.

A thin ctypes layer over libmemtrace (no compiled code of its own). The library
is found through MEMTRACE_LIBRARY, then next to this package (an installed tree's
lib/ or a build tree's .libs/), then by the dynamic linker's search.

    import memtrace
    memtrace.record_memory_history(context="all", stacks="all", max_entries=100000)
    with memtrace.annotate("forward"):
        ...
    memtrace.dump_snapshot("run.memtrace")

Every event recorded by this process (memtrace's own allocator, or the preload
library under `memtrace run`) carries the calling thread's Python frames in place
of the interpreter's frames; see docs/python.md.
"""

import ctypes
import functools
import os

__all__ = [
    "MemtraceError",
    "record_memory_history",
    "dump_snapshot",
    "annotate",
    "category",
    "use_with_torch",
    "library_path",
]

_MAX_FRAMES = 128
_CONTEXTS = {None: 0, "none": 0, "state": 1, "alloc": 2, "all": 3}
_STACKS = {"all": 0, "native": 1, "python": 2}


class MemtraceError(RuntimeError):
    """A call into libmemtrace failed, or memtrace cannot do what was asked."""


class _Options(ctypes.Structure):
    _fields_ = [
        ("context", ctypes.c_int),
        ("max_entries", ctypes.c_size_t),
        ("skip_actions", ctypes.c_uint32),
        ("stack_depth", ctypes.c_int),
        ("stream_path", ctypes.c_char_p),
        ("flush_ms", ctypes.c_uint),
        ("stacks", ctypes.c_int),
    ]


def _candidates():
    env = os.environ.get("MEMTRACE_LIBRARY")
    if env:
        yield env
        return
    here = os.path.dirname(os.path.abspath(__file__))
    # Installed: <prefix>/lib/pythonX.Y/site-packages/memtrace -> <prefix>/lib.
    # Build tree: <src>/python/memtrace, with the library in <build>/.libs.
    for rel in ("../../..", "../../../..", "../../build/.libs", "../../.libs"):
        yield os.path.normpath(os.path.join(here, rel, "libmemtrace.so.0"))
    yield "libmemtrace.so.0"


def library_path():
    """The path of the libmemtrace this package loads (loading it on first use)."""
    return _load()._name


_lib = None


def _load():
    global _lib
    if _lib is not None:
        return _lib
    errors = []
    for path in _candidates():
        if os.sep in path and not os.path.exists(path):
            continue
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            errors.append(str(e))
            continue
        lib.memtrace_options_init.argtypes = [ctypes.POINTER(_Options)]
        lib.memtrace_options_init.restype = None
        lib.memtrace_record_history.argtypes = [ctypes.POINTER(_Options)]
        lib.memtrace_dump_snapshot.argtypes = [ctypes.c_char_p]
        lib.memtrace_annotate_push.argtypes = [ctypes.c_char_p]
        lib.memtrace_annotate_pop.argtypes = []
        lib.memtrace_category_push.argtypes = [ctypes.c_char_p]
        lib.memtrace_category_pop.argtypes = []
        lib.memtrace_strerror.argtypes = [ctypes.c_int]
        lib.memtrace_strerror.restype = ctypes.c_char_p
        _lib = lib
        return lib
    raise MemtraceError(
        "cannot load libmemtrace (set MEMTRACE_LIBRARY to its path): "
        + ("; ".join(errors) or "not found")
    )


def _check(rc, what):
    if rc != 0:
        text = _load().memtrace_strerror(rc).decode()
        raise MemtraceError("%s: %s" % (what, text))


def _name(name, what):
    if not isinstance(name, str) or not name:
        raise ValueError("%s needs a non-empty string, not %r" % (what, name))
    return name.encode()


def record_memory_history(context="all", stacks="all", max_entries=0, depth=32, stream=None):
    """Starts (or reconfigures) recording, as PyTorch's _record_memory_history.

    context: None or "none" (no stacks), "state" (allocations), "alloc" (and
    segments), "all" (every event, frees too). stacks: "all" (native frames with
    the Python frames in place of the interpreter's), "native" or "python" (Python
    frames only, the cheapest). max_entries: events kept in memory, 0 for no
    limit. depth: frames per stack, 1 to 128. stream: a path to stream every event
    to, or None; started while the allocator holds memory, the file begins with
    what was live. context=None with stacks=None stops recording.
    """
    lib = _load()
    if context is None and stacks is None:
        _check(lib.memtrace_record_history(None), "record_memory_history")
        return
    if context not in _CONTEXTS:
        raise ValueError("context must be one of none, state, alloc, all, not %r" % (context,))
    if stacks not in _STACKS:
        raise ValueError("stacks must be one of all, native, python, not %r" % (stacks,))
    if not isinstance(depth, int) or not 1 <= depth <= _MAX_FRAMES:
        raise ValueError("depth must be 1 to %d frames, not %r" % (_MAX_FRAMES, depth))
    if not isinstance(max_entries, int) or max_entries < 0:
        raise ValueError("max_entries must be a whole number, not %r" % (max_entries,))
    o = _Options()
    lib.memtrace_options_init(ctypes.byref(o))
    o.context = _CONTEXTS[context]
    o.stacks = _STACKS[stacks]
    o.stack_depth = depth
    o.max_entries = max_entries
    if stream is not None:
        o.stream_path = os.fsencode(stream)
    _check(lib.memtrace_record_history(ctypes.byref(o)), "record_memory_history")


def dump_snapshot(path):
    """Writes what was recorded (history and live state) to a .memtrace file."""
    _check(_load().memtrace_dump_snapshot(os.fsencode(path)), "dump_snapshot(%s)" % path)


class _Scope:
    """A named range: a context manager, and a decorator of functions."""

    def __init__(self, name, push, pop, what):
        self._name = _name(name, what)
        self._push, self._pop, self._what = push, pop, what

    def __enter__(self):
        _check(self._push(self._name), self._what)
        return self

    def __exit__(self, *exc):
        _check(self._pop(), self._what)
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self:
                return fn(*args, **kwargs)

        return wrapper


def annotate(name):
    """A range on this thread's timeline named name: `with annotate("fwd"):` or
    `@annotate("fwd")`. Records an annotate event at each end."""
    lib = _load()
    return _Scope(name, lib.memtrace_annotate_push, lib.memtrace_annotate_pop, "annotate")


def category(name):
    """Allocations this thread makes inside are tagged name (context manager or
    decorator)."""
    lib = _load()
    return _Scope(name, lib.memtrace_category_push, lib.memtrace_category_pop, "category")


def use_with_torch():
    """Makes memtrace's caching allocator PyTorch's CUDA allocator, through
    torch.cuda.memory.CUDAPluggableAllocator; call it before the first CUDA tensor.
    Raises MemtraceError when torch is missing or has no CUDA."""
    try:
        import torch
    except ImportError:
        raise MemtraceError("use_with_torch needs PyTorch, which is not installed") from None
    pluggable = getattr(getattr(torch.cuda, "memory", None), "CUDAPluggableAllocator", None)
    if getattr(torch.version, "cuda", None) is None or pluggable is None:
        raise MemtraceError(
            "use_with_torch needs a CUDA build of PyTorch; this one (%s) has no CUDA"
            % torch.__version__
        )
    alloc = pluggable(library_path(), "memtrace_torch_malloc", "memtrace_torch_free")
    torch.cuda.memory.change_current_allocator(alloc)
    return alloc
