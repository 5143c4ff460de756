/* strtab.c: the recorder's string table.
 *
 * Ids index a two-level table of pointers (pages of 4096 entries) so that a reader
 * holding an id never sees storage move; the hash index from string to id is an
 * open-addressing table rebuilt on growth, used only under the lock. Everything
 * lives in mmap'd memory: interning runs inside interposed allocation paths. */
#include "config.h"

#include "strtab.h"
#include "mtx/util.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#define PAGE_BITS         12
#define PAGE_SIZE_ENTRIES (1u << PAGE_BITS)
#define MAX_PAGES         65536u

static pthread_mutex_t strings_lock = PTHREAD_MUTEX_INITIALIZER;
static struct mtx_arena strings_arena;
static const char **pages[MAX_PAGES];
static _Atomic uint32_t strings_n; /* ids 1..strings_n are published */
static uint32_t *index_slots;      /* id per slot, 0 = empty */
static uint32_t index_cap;

static const char *entry(uint32_t id)
{
    return pages[id >> PAGE_BITS][id & (PAGE_SIZE_ENTRIES - 1)];
}

static uint32_t *index_find(uint32_t *slots, uint32_t cap, const char *s, size_t len, uint64_t h)
{
    uint32_t i = (uint32_t)h & (cap - 1);
    for (;;) {
        uint32_t id = slots[i];
        if (id == 0)
            return &slots[i];
        const char *e = entry(id);
        if (strncmp(e, s, len) == 0 && e[len] == '\0')
            return &slots[i];
        i = (i + 1) & (cap - 1);
    }
}

static int index_grow(void)
{
    uint32_t ncap = index_cap ? index_cap * 2 : 1024;
    uint32_t *ns = mtx_map((size_t)ncap * sizeof *ns);
    if (ns == NULL)
        return -1;
    uint32_t n = atomic_load_explicit(&strings_n, memory_order_relaxed);
    for (uint32_t id = 1; id <= n; id++) {
        const char *e = entry(id);
        size_t len = strlen(e);
        *index_find(ns, ncap, e, len, mtx_hash_bytes(e, len)) = id;
    }
    mtx_unmap(index_slots, (size_t)index_cap * sizeof *index_slots);
    index_slots = ns;
    index_cap = ncap;
    return 0;
}

uint32_t mt_strings_intern(const char *s)
{
    if (s == NULL || *s == '\0')
        return 0;
    size_t len = strlen(s);
    uint64_t h = mtx_hash_bytes(s, len);
    uint32_t id = 0;
    pthread_mutex_lock(&strings_lock);
    uint32_t n = atomic_load_explicit(&strings_n, memory_order_relaxed);
    if ((n + 1) * 2 > index_cap && index_grow() != 0)
        goto out;
    uint32_t *slot = index_find(index_slots, index_cap, s, len, h);
    if (*slot != 0) {
        id = *slot;
        goto out;
    }
    uint32_t nid = n + 1;
    if ((nid >> PAGE_BITS) >= MAX_PAGES)
        goto out;
    const char **page = pages[nid >> PAGE_BITS];
    if (page == NULL) {
        page = mtx_map(PAGE_SIZE_ENTRIES * sizeof *page);
        if (page == NULL)
            goto out;
        pages[nid >> PAGE_BITS] = page;
    }
    char *copy = mtx_arena_alloc(&strings_arena, len + 1, 1);
    if (copy == NULL)
        goto out;
    memcpy(copy, s, len + 1);
    page[nid & (PAGE_SIZE_ENTRIES - 1)] = copy;
    *slot = nid;
    atomic_store_explicit(&strings_n, nid, memory_order_release);
    id = nid;
out:
    pthread_mutex_unlock(&strings_lock);
    return id;
}

uint32_t mt_strings_count(void)
{
    return atomic_load_explicit(&strings_n, memory_order_acquire);
}

const char *mt_strings_get(uint32_t id)
{
    if (id == 0 || id > mt_strings_count())
        return "";
    return entry(id);
}

void mt_strings_atfork_child(void)
{
    pthread_mutex_init(&strings_lock, NULL);
}
