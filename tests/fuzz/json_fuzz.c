/* json_fuzz: the PyTorch snapshot importer (snapshot/import_pytorch.c) on JSON text:
 * segments, blocks, device traces, annotations, frames and the integers in them.
 * Seeds: tests/fuzz/corpus/json/; dictionary: tests/fuzz/json.dict. */
#include "config.h"

#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_import(data, size);
    return 0;
}
