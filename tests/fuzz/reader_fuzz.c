/* reader_fuzz: the .memtrace reader and the replay model on raw bytes, walked as
 * `memtrace info` and `summary` do. Seeds: tests/fuzz/corpus/reader/. */
#include "config.h"

#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_walk(fuzz_file(data, size), NULL);
    return 0;
}
