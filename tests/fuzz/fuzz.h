/* fuzz.h: what the libFuzzer targets in tests/fuzz/ share (tests/fuzz/README.md).
 * Each target defines LLVMFuzzerTestOneInput(); the readers under test take paths, so
 * an input reaches them through a memory-backed file that lives as long as the
 * process. A broken invariant aborts, which libFuzzer reports as a crash. */
#ifndef MEMTRACE_FUZZ_H
#define MEMTRACE_FUZZ_H

#include <stddef.h>
#include <stdint.h>

#include "replay.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A file in memory (memfd, else an unlinked temporary file) that holds data[0..size)
 * after the call: returns its path (/proc/self/fd/N), the same file on every call. */
const char *fuzz_file(const uint8_t *data, size_t size);

/* A scratch directory of this process for outputs, created on first use. */
const char *fuzz_dir(void);

/* Aborts with the message when cond is false: a finding. */
#define FUZZ_CHECK(cond, what)                                                                     \
    do {                                                                                           \
        if (!(cond))                                                                               \
            fuzz_fail(__FILE__, __LINE__, what);                                                   \
    } while (0)
void fuzz_fail(const char *file, int line, const char *what) __attribute__((noreturn));

/* Reads the .memtrace file at path as `memtrace info` and `summary` do, through the
 * replay model with filter f (NULL: none): every event with its stack, frames and
 * strings, the final state, the metadata and end record, per-device levels and the
 * stacks' tallies at the peak. Checks what a reader promises (an error names the
 * file and has text; levels never exceed their peaks; metadata is a JSON object) and
 * returns the replay's last result: 0 at the end or a negative code. */
int fuzz_walk(const char *path, const struct mt_filter *f);

/* Imports data[0..size) as a PyTorch snapshot (mt_import_pytorch) into a scratch
 * file, then walks the output: an import either fails with one line naming the input
 * and leaves no output, or writes a file that reads whole, with the events it
 * counted. Returns the import's result. */
int fuzz_import(const uint8_t *data, size_t size);

#endif
