/* corpus-t: one fuzz target's entry point over every file of its seed corpus,
 * tests/fuzz/corpus/FUZZ_NAME/, in an ordinary build (no clang, no libFuzzer). The
 * inputs that once found a bug are kept there, so every build and every sanitizer
 * build replays them; a broken promise aborts in the target (FUZZ_CHECK), a memory
 * error stops the sanitizers, and either fails the test. */
#include "config.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "tap.h"

#ifndef MT_SRCDIR
#define MT_SRCDIR "."
#endif

static int is_seed(const struct dirent *d)
{
    return d->d_name[0] != '.';
}

static unsigned char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    unsigned char *buf = NULL;
    size_t cap = 0;
    *len = 0;
    if (f == NULL)
        return NULL;
    for (;;) {
        if (*len == cap) {
            cap = cap ? cap * 2 : 4096;
            unsigned char *p = realloc(buf, cap);
            if (p == NULL)
                break;
            buf = p;
        }
        size_t n = fread(buf + *len, 1, cap - *len, f);
        *len += n;
        if (n == 0)
            break;
    }
    fclose(f);
    return buf;
}

int main(void)
{
    const char *top = getenv("top_srcdir");
    char dir[1024];
    snprintf(dir, sizeof(dir), "%s/tests/fuzz/corpus/%s", top && *top ? top : MT_SRCDIR, FUZZ_NAME);
    struct dirent **names;
    int n = scandir(dir, &names, is_seed, alphasort);
    if (n < 0)
        bail_out("cannot list the seed corpus");
    for (int i = 0; i < n; i++) {
        char path[1300];
        size_t len;
        snprintf(path, sizeof(path), "%s/%s", dir, names[i]->d_name);
        unsigned char *data = read_all(path, &len);
        ok(data != NULL || len == 0, "%s/%s: %zu bytes read", FUZZ_NAME, names[i]->d_name, len);
        LLVMFuzzerTestOneInput(data ? data : (const unsigned char *)"", len);
        ok(1, "%s/%s: no finding", FUZZ_NAME, names[i]->d_name);
        free(data);
        free(names[i]);
    }
    free(names);
    ok(n >= 3, "%s: the corpus has its seeds (%d)", FUZZ_NAME, n);
    done_testing();
    return exit_status();
}
