/* stack.h: native stack capture (libunwind) and the process-wide stack trie.
 *
 * A stack is interned as a path of trie nodes (parent, frame) from the outermost
 * frame to the innermost; the id of the innermost node is the stack id, so a
 * repeated stack costs one id. Frames are distinct instruction pointers, interned
 * once. Ids start at 1; 0 means "no stack" / "root". Tables only grow for the life
 * of the process, in mmap'd memory (no libc malloc), and are safe to read
 * concurrently with interning. */
#ifndef MEMTRACE_STACK_H
#define MEMTRACE_STACK_H

#include <stdint.h>

/* Captures the caller's stack into ips (innermost first): at most max return
 * addresses, after skipping skip frames above the caller (skip = 0 keeps the
 * caller of mt_stack_capture as ips[0]) and then the frames, if any, that lie in
 * memtrace's own shared libraries (libmemtrace*.so): a stack starts where the
 * program called memtrace. Returns the number captured (0 on failure).
 * Async-signal-unsafe but malloc-free. */
int mt_stack_capture(uintptr_t *ips, int max, int skip);

/* Captures the caller's stack as mt_stack_capture does, with the frames kind names
 * (enum memtrace_stacks): NATIVE as mt_stack_capture; ALL also replaces each native
 * frame of CPython's evaluation loop by the Python frames it runs (stack_py.h), max
 * then counting native frames; PYTHON keeps the thread's Python frames alone (at
 * most max). A thread with no Python frames gets its native stack under every kind.
 * ips must hold MEMTRACE_MAX_FRAMES entries. Returns the number captured. */
int mt_stack_capture_as(uintptr_t *ips, int max, int skip, int kind);

/* Interns ips[0..n) (innermost first) and returns the stack id, or 0 when n == 0 or
 * memory is exhausted. Thread-safe. */
uint32_t mt_stack_intern(const uintptr_t *ips, int n);

/* Number of trie nodes / frames interned so far; ids run 1..count. */
uint32_t mt_stack_node_count(void);
uint32_t mt_frame_count(void);

/* Node id's parent node (0 for an outermost frame) and frame id. */
void mt_stack_node(uint32_t id, uint32_t *parent, uint32_t *frame);

/* Frame id's instruction pointer (a return address, as captured). */
uintptr_t mt_frame_ip(uint32_t id);

/* Called in a forked child: re-initialises locks. */
void mt_stack_atfork_child(void);

#endif
