#include "config.h"

#include "mtx/pattern.h"

#include <string.h>
#include <unistd.h>

#include "mtx/rank.h"
#include "mtx/util.h"

static const char *lookup(const struct mtx_pattern_var *vars, size_t nvars, char key)
{
    if (key == '%')
        return "%";
    for (size_t i = 0; i < nvars; i++)
        if (vars[i].key == key)
            return vars[i].value != NULL ? vars[i].value : "";
    return NULL;
}

int mtx_pattern_expand(char *out, size_t size, const char *pattern,
                       const struct mtx_pattern_var *vars, size_t nvars, int strict)
{
    size_t n = 0;
    int cut = 0;
    for (const char *p = pattern; *p && !cut; p++) {
        char one[3] = {*p, '\0', '\0'};
        const char *add = one;
        if (*p == '%') {
            add = p[1] != '\0' ? lookup(vars, nvars, p[1]) : NULL;
            if (add == NULL) {
                if (strict)
                    return -1;
                one[1] = p[1];
                add = one;
            }
            if (p[1] != '\0')
                p++;
        }
        size_t len = strlen(add);
        if (n + len + 1 > size) {
            if (strict || size == 0)
                return -1;
            len = size - 1 - n;
            cut = 1;
        }
        memcpy(out + n, add, len);
        n += len;
    }
    if (size > 0)
        out[n] = '\0';
    return (int)n;
}

void mtx_hostname(char *out, size_t size)
{
    if (size == 0)
        return;
    if (gethostname(out, size - 1) != 0 || out[0] == '\0')
        mtx_format(out, size, "%s", "localhost");
    out[size - 1] = '\0';
}

int mtx_output_path(char *out, size_t size, const char *pattern, int pid)
{
    char pid_s[24], rank_s[24], host[256];
    mtx_format(pid_s, sizeof pid_s, "%d", pid);
    long rank = mtx_rank();
    mtx_format(rank_s, sizeof rank_s, "%ld", rank >= 0 ? rank : 0L);
    mtx_hostname(host, sizeof host);
    const struct mtx_pattern_var vars[] = {{'p', pid_s}, {'r', rank_s}, {'h', host}};
    int n = mtx_pattern_expand(out, size, pattern, vars, MTX_ARRAY_SIZE(vars), 1);
    return n > 0 ? 0 : -1;
}

void mtx_output_glob(char *out, size_t size, const char *pattern)
{
    char host[256], rank_s[24];
    mtx_hostname(host, sizeof host);
    long rank = mtx_rank();
    mtx_format(rank_s, sizeof rank_s, "%ld", rank >= 0 ? rank : 0L);
    const struct mtx_pattern_var vars[] = {{'p', "*"}, {'r', rank_s}, {'h', host}};
    mtx_pattern_expand(out, size, pattern, vars, MTX_ARRAY_SIZE(vars), 0);
}
