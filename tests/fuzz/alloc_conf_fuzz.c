/* alloc_conf_fuzz: the caching allocator's configuration parser
 * (libtrace/cache_config.c), PyTorch's "key:value,..." syntax as MEMTRACE_ALLOC_CONF
 * and memtrace_alloc_config_set() take it. A string either parses, and its settings
 * then write as a JSON object that jansson reads back with the same values (the
 * recording's metadata carries it; bytes of oom_snapshot that are not UTF-8 read back
 * as \xNN text), or is refused with a position inside the string
 * and the text "MEMTRACE_ALLOC_CONF: ...". Seeds: tests/fuzz/corpus/alloc_conf/;
 * dictionary: tests/fuzz/alloc_conf.dict. */
#include "config.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "cache_impl.h"
#include "fuzz.h"
#include "mtx/escape.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *conf = malloc(size + 1);
    FUZZ_CHECK(conf != NULL, "out of memory");
    memcpy(conf, data, size);
    conf[size] = 0;
    struct mt_alloc_settings s, before;
    mt_alloc_settings_default(&s);
    before = s;
    struct memtrace_alloc_config_error err;
    memset(&err, 0, sizeof(err));
    int rc = mt_alloc_config_parse(conf, &s, &err);
    if (rc != 0) {
        FUZZ_CHECK(rc == MEMTRACE_ECONFIG, "a bad string is MEMTRACE_ECONFIG");
        FUZZ_CHECK(err.position >= 0 && (size_t)err.position <= strlen(conf),
                   "an error's position is inside the string");
        FUZZ_CHECK(strncmp(err.text, "MEMTRACE_ALLOC_CONF: ", 21) == 0,
                   "an error's text names the variable");
        FUZZ_CHECK(memcmp(&s, &before, sizeof(s)) == 0, "a refused string changed the settings");
        free(conf);
        return 0;
    }
    struct mt_alloc_settings merged;
    mt_alloc_settings_default(&merged);
    mt_alloc_settings_merge(&merged, &s);
    char buf[4096];
    size_t len = mt_alloc_settings_to_json(&merged, buf, sizeof(buf));
    FUZZ_CHECK(len < sizeof(buf), "the settings' JSON does not fit");
    FUZZ_CHECK(strlen(buf) == len, "the settings' JSON has the length it returns");
    json_error_t jerr;
    json_t *j = json_loads(buf, 0, &jerr);
    FUZZ_CHECK(j != NULL && json_is_object(j), "the settings' JSON does not read back");
    json_t *oom = json_object_get(j, "oom_snapshot");
    char *kept = mtx_escape_dup(merged.oom_snapshot, 1);
    FUZZ_CHECK(kept != NULL, "out of memory");
    FUZZ_CHECK(merged.oom_snapshot[0]
                   ? json_is_string(oom) && strcmp(json_string_value(oom), kept) == 0
                   : json_is_null(oom),
               "oom_snapshot reads back as given, bytes that are not UTF-8 as \\xNN");
    free(kept);
    json_t *div = json_object_get(j, "roundup_power2_divisions");
    FUZZ_CHECK(json_array_size(div) == MT_DIV_INTERVALS, "every division interval is written");
    for (size_t i = 0; i < MT_DIV_INTERVALS; i++)
        FUZZ_CHECK(json_integer_value(json_array_get(div, i)) == merged.divisions[i],
                   "a division reads back as it was given");
    json_decref(j);
    free(conf);
    return 0;
}
