/* cache_config-t: every MEMTRACE_ALLOC_CONF key, valid and invalid, with exact texts. */
#include <stdlib.h>

#include <jansson.h>

#include "cache_impl.h"
#include "tests/tap.h"

static void bad(const char *conf, int pos, const char *text)
{
    struct mt_alloc_settings s;
    struct memtrace_alloc_config_error err = {-1, ""};
    mt_alloc_settings_default(&s);
    is_int(MEMTRACE_ECONFIG, mt_alloc_config_parse(conf, &s, &err), "rejected: %s", conf);
    is_int(pos, err.position, "position for %s", conf);
    is_string(text, err.text, "text for %s", conf);
}

int main(void)
{
    struct mt_alloc_settings s;
    struct memtrace_allocator *a;
    struct memtrace_device *d;
    char json[1024];

    mt_alloc_settings_default(&s);
    is_int(0,
           mt_alloc_config_parse("max_split_size_mb:64, garbage_collection_threshold:0.6,"
                                 "expandable_segments:True,release_lock_on_cudamalloc:True,"
                                 "pinned_use_cuda_host_register:False,oom_snapshot:/tmp/x_%p",
                                 &s, NULL),
           "all keys parse");
    is_int(64 << 20, s.max_split_size, "max_split_size_mb");
    ok(s.gc_threshold > 0.599 && s.gc_threshold < 0.601, "garbage_collection_threshold");
    is_int(1, s.expandable, "expandable_segments");
    is_int(1, s.release_lock_on_cudamalloc, "release_lock_on_cudamalloc");
    is_int(0, s.pinned_use_cuda_host_register, "pinned_use_cuda_host_register");
    is_string("/tmp/x_%p", s.oom_snapshot, "oom_snapshot");
    is_int(0, mt_alloc_config_parse("roundup_power2_divisions:[256:1,512:2,1024:4,>:8]", &s, NULL),
           "list form");
    is_int(1, s.divisions[0], "first entry covers smaller intervals");
    is_int(1, s.divisions[8], "256 MiB: 1");
    is_int(2, s.divisions[9], "512 MiB: 2");
    is_int(4, s.divisions[10], "1024 MiB: 4");
    is_int(8, s.divisions[15], "'>': 8");
    is_int(0, mt_alloc_config_parse("roundup_power2_divisions:16", &s, NULL), "int form");
    is_int(16, s.divisions[3], "int applies everywhere");
    is_int(0, mt_alloc_config_parse("", &s, NULL), "empty string");
    is_int(0, mt_alloc_config_parse("expandable_segments:False,", &s, NULL), "trailing comma");
    is_int(0, s.expandable, "False");
    mt_alloc_settings_to_json(&s, json, sizeof(json));
    ok(strstr(json, "\"max_split_size_mb\": 64") != NULL, "json: %s", json);

    /* A path is bytes: what is not UTF-8 stays as \xNN text, or jansson would refuse the
     * whole object and the recording's metadata would lose allocator_settings (found by
     * tests/fuzz/alloc_conf-fuzz). The longest value, every byte escaped, still fits. */
    is_int(0, mt_alloc_config_parse("oom_snapshot:/tmp/caf\xe9 \"q\"\\\t\xc3\xa9", &s, NULL),
           "oom_snapshot with a Latin-1 byte, quotes, a backslash, a tab and UTF-8");
    char big[4096];
    size_t len = mt_alloc_settings_to_json(&s, big, sizeof(big));
    json_error_t jerr;
    json_t *j = json_loads(big, 0, &jerr);
    is_string("/tmp/caf\\xe9 \"q\"\\\t\xc3\xa9",
              json_string_value(json_object_get(j, "oom_snapshot")),
              "the settings read back as JSON, the Latin-1 byte as \\xe9: %s", big);
    json_decref(j);
    char conf[600] = "oom_snapshot:";
    memset(conf + 13, 0x01, 511);
    conf[13 + 511] = 0;
    is_int(0, mt_alloc_config_parse(conf, &s, NULL), "511 control bytes");
    len = mt_alloc_settings_to_json(&s, big, sizeof(big));
    j = json_loads(big, 0, &jerr);
    ok(len < sizeof(big) && j != NULL &&
           strlen(json_string_value(json_object_get(j, "oom_snapshot"))) == 511,
       "the longest oom_snapshot, every byte escaped, writes in %zu bytes and reads back", len);
    json_decref(j);

    bad("max_split_sz_mb:64", 0,
        "MEMTRACE_ALLOC_CONF: unknown key 'max_split_sz_mb' at 0 (known: max_split_size_mb, "
        "roundup_power2_divisions, garbage_collection_threshold, expandable_segments, "
        "release_lock_on_cudamalloc, pinned_use_cuda_host_register, oom_snapshot)");
    bad("expandable_segments:True,max_split_size_mb:20", 43,
        "MEMTRACE_ALLOC_CONF: bad value '20' for max_split_size_mb at 43 (expected an integer > "
        "20)");
    bad("max_split_size_mb:abc", 18,
        "MEMTRACE_ALLOC_CONF: bad value 'abc' for max_split_size_mb at 18 (expected an integer > "
        "20)");
    bad("garbage_collection_threshold:1.0", 29,
        "MEMTRACE_ALLOC_CONF: bad value '1.0' for garbage_collection_threshold at 29 (expected a "
        "number between 0 and 1, both excluded)");
    bad("garbage_collection_threshold:0", 29,
        "MEMTRACE_ALLOC_CONF: bad value '0' for garbage_collection_threshold at 29 (expected a "
        "number between 0 and 1, both excluded)");
    bad("expandable_segments:true", 20,
        "MEMTRACE_ALLOC_CONF: bad value 'true' for expandable_segments at 20 (expected True or "
        "False)");
    bad("release_lock_on_cudamalloc:1", 27,
        "MEMTRACE_ALLOC_CONF: bad value '1' for release_lock_on_cudamalloc at 27 (expected True "
        "or False)");
    bad("pinned_use_cuda_host_register:yes", 30,
        "MEMTRACE_ALLOC_CONF: bad value 'yes' for pinned_use_cuda_host_register at 30 (expected "
        "True or False)");
    bad("roundup_power2_divisions:3", 25,
        "MEMTRACE_ALLOC_CONF: bad value '3' for roundup_power2_divisions at 25 (expected a power "
        "of two or a [size_mb:divisions,...] list)");
    bad("roundup_power2_divisions:[100:2]", 26,
        "MEMTRACE_ALLOC_CONF: bad size '100' in roundup_power2_divisions at 26 (expected a power "
        "of two in MiB, or '>')");
    bad("roundup_power2_divisions:[256:3]", 30,
        "MEMTRACE_ALLOC_CONF: bad value '3' for roundup_power2_divisions at 30 (expected a power "
        "of two)");
    bad("roundup_power2_divisions:[256]", 26,
        "MEMTRACE_ALLOC_CONF: bad entry '256' in roundup_power2_divisions at 26 (expected "
        "size_mb:divisions)");
    bad("roundup_power2_divisions:[256:2", 25,
        "MEMTRACE_ALLOC_CONF: bad list for roundup_power2_divisions at 25 (expected "
        "[size_mb:divisions,...,>:divisions])");
    bad("expandable_segments", 0,
        "MEMTRACE_ALLOC_CONF: expected 'key:value' at 0, got 'expandable_segments'");

    /* A failed parse changes nothing. */
    mt_alloc_settings_default(&s);
    mt_alloc_config_parse("expandable_segments:True,max_split_size_mb:1", &s, NULL);
    is_int(0, s.expandable, "nothing applied from a rejected string");

    /* The environment and the process-wide API. */
    if (memtrace_device_open_host(&d, 1ull << 30))
        bail_out("no host device");
    setenv("MEMTRACE_ALLOC_CONF", "max_split_sz_mb:64", 1);
    is_int(MEMTRACE_ECONFIG, memtrace_alloc_create(&a, d), "bad environment refused");
    setenv("MEMTRACE_ALLOC_CONF", "max_split_size_mb:64", 1);
    is_int(0, memtrace_alloc_create(&a, d), "environment read at create");
    memtrace_alloc_settings_json(a, json, sizeof(json));
    ok(strstr(json, "\"max_split_size_mb\": 64") != NULL, "env applied");
    is_int(MEMTRACE_ECONFIG, memtrace_alloc_config_set("bogus:1"), "config_set rejects");
    ok(strstr(memtrace_alloc_config_error_text(), "unknown key 'bogus' at 0") != NULL,
       "error text kept: %s", memtrace_alloc_config_error_text());
    is_int(0, memtrace_alloc_config_set("max_split_size_mb:128,expandable_segments:True"),
           "config_set");
    memtrace_alloc_settings_json(a, json, sizeof(json));
    ok(strstr(json, "\"max_split_size_mb\": 128") && strstr(json, "\"expandable_segments\": true"),
       "config_set applies to a live allocator: %s", json);
    is_string("", memtrace_alloc_config_error_text(), "error text cleared");
    memtrace_alloc_destroy(a);
    unsetenv("MEMTRACE_ALLOC_CONF");
    is_int(0, memtrace_alloc_create(&a, d), "new allocator");
    memtrace_alloc_settings_json(a, json, sizeof(json));
    ok(strstr(json, "\"max_split_size_mb\": 128") != NULL, "API settings apply to new ones");
    memtrace_alloc_destroy(a);
    memtrace_alloc_config_set("expandable_segments:False");
    memtrace_device_close(d);
    done_testing();
    return exit_status();
}
