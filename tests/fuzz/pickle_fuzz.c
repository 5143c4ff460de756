/* pickle_fuzz: the pickle reader (snapshot/pickle.c) on raw bytes, then the PyTorch
 * importer on the same bytes when they are a pickle. What the reader builds must be
 * JSON that jansson can write. Seeds: tests/fuzz/corpus/pickle/. */
#include "config.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "memtrace.h"
#include "pickle.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *root = NULL;
    struct mt_pickle_error err;
    memset(&err, 0, sizeof(err));
    int rc = mt_pickle_load(data, size, &root, &err);
    if (rc != 0) {
        FUZZ_CHECK(root == NULL && err.code == rc && err.text[0] != 0,
                   "a refused pickle has its code and text");
        return 0;
    }
    FUZZ_CHECK(root != NULL, "a pickle read to nothing");
    char *text = json_dumps(root, JSON_ENCODE_ANY | JSON_COMPACT);
    FUZZ_CHECK(text != NULL, "a pickle's tree cannot be written as JSON");
    free(text);
    json_decref(root);
    if (size > 0 && data[0] == 0x80)
        fuzz_import(data, size);
    return 0;
}
