/* cli_json.c: JSON output and the metadata figures commands read. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

json_t *cli_json_str(const char *s)
{
    json_t *j = json_string(s ? s : "");
    if (j)
        return j;
    char *e = cli_escape(s, 1);
    j = json_string(e ? e : "");
    free(e);
    return j;
}

int cli_json_print(json_t *obj)
{
    int rc = json_dumpf(obj, stdout, JSON_INDENT(2));
    json_decref(obj);
    if (rc != 0 || fputc('\n', stdout) == EOF || fflush(stdout) != 0) {
        cli_error("cannot write the JSON output: %s", strerror(errno));
        return CLI_EXIT_FAIL;
    }
    return CLI_EXIT_OK;
}

json_t *cli_json_u64(uint64_t v)
{
    return json_integer(v > INT64_MAX ? INT64_MAX : (json_int_t)v);
}

static int json_u64(json_t *o, const char *key, uint64_t *out)
{
    json_t *v = json_object_get(o, key);
    if (json_is_integer(v) && json_integer_value(v) > 0) {
        *out = (uint64_t)json_integer_value(v);
        return 1;
    }
    /* 2^64 and above (1e300) would be undefined as an integer: absent. */
    if (json_is_real(v) && json_real_value(v) > 0 && json_real_value(v) < 18446744073709551616.0) {
        *out = (uint64_t)json_real_value(v);
        return 1;
    }
    return 0;
}

int cli_meta_clock(json_t *meta, uint64_t *wall_ns, uint64_t *mono_ns)
{
    *wall_ns = 0;
    *mono_ns = 0;
    if (!json_is_object(meta))
        return 0;
    if (!json_u64(meta, "start_time_ns", wall_ns) && !json_u64(meta, "start_wall_ns", wall_ns))
        return 0;
    if (!json_u64(meta, "start_mono_ns", mono_ns) && !json_u64(meta, "start_monotonic_ns", mono_ns))
        *mono_ns = 0;
    return 1;
}
