/* symbolize.c: return address -> module, offset, function, file, line.
 *
 * Function names come from the module's own ELF symbol tables, read from the file
 * on disk, so static functions resolve in programs linked without -rdynamic
 * (dladdr sees only .dynsym). When the file is stripped of .symtab, the separate
 * debug file named by its build id is tried. File and line come from DWARF through
 * libdw's process view when the build has libdw. Everything is cached per module
 * under one mutex; this runs once per distinct frame, off the recording path. */
#include "config.h"

#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#if MEMTRACE_HAVE_LIBDW
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#endif

#include "symbolize.h"
#include "mtx/util.h"

static const bool have_libdw = MEMTRACE_HAVE_LIBDW;

struct sym {
    uint64_t addr;
    uint64_t size;
    const char *name; /* inside one of the module's file mappings */
    int rank;         /* among aliases at one address, the higher is shown */
};

struct file_map {
    void *base;
    size_t len;
};

struct module {
    struct module *next;
    char *path;
    struct file_map maps[2]; /* the object, and its debug file when stripped */
    struct sym *syms;
    size_t nsyms;
};

static pthread_mutex_t sym_lock = PTHREAD_MUTEX_INITIALIZER;
static struct module *modules;

static bool map_file(const char *path, struct file_map *m)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    struct stat st;
    void *p = MAP_FAILED;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size >= (off_t)sizeof(Elf64_Ehdr))
        p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (p == MAP_FAILED)
        return false;
    m->base = p;
    m->len = (size_t)st.st_size;
    return true;
}

/* Section headers of a well-formed native ELF64 file, or NULL. */
static const Elf64_Shdr *elf_sections(const struct file_map *m, size_t *count)
{
    const Elf64_Ehdr *eh = m->base;
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
        eh->e_shentsize != sizeof(Elf64_Shdr) || eh->e_shnum == 0)
        return NULL;
    if (eh->e_shoff > m->len || (m->len - eh->e_shoff) / sizeof(Elf64_Shdr) < eh->e_shnum)
        return NULL;
    *count = eh->e_shnum;
    return (const Elf64_Shdr *)((const char *)m->base + eh->e_shoff);
}

static bool section_in_file(const struct file_map *m, const Elf64_Shdr *sh)
{
    return sh->sh_type != SHT_NOBITS && sh->sh_offset <= m->len &&
           sh->sh_size <= m->len - sh->sh_offset;
}

static int name_rank(const char *name, unsigned bind)
{
    int underscores = 0;
    while (name[underscores] == '_' && underscores < 3)
        underscores++;
    int b = bind == STB_GLOBAL ? 2 : bind == STB_WEAK ? 1 : 0;
    return (3 - underscores) * 4 + b;
}

/* Appends the STT_FUNC symbols of the first section of type `type`; returns how
 * many it found, or -1 when out of memory. */
static long add_symbols(struct module *mod, const struct file_map *m, unsigned type, size_t *cap)
{
    size_t nsec;
    const Elf64_Shdr *sh = elf_sections(m, &nsec);
    if (sh == NULL)
        return 0;
    for (size_t i = 0; i < nsec; i++) {
        if (sh[i].sh_type != type || sh[i].sh_entsize != sizeof(Elf64_Sym) ||
            !section_in_file(m, &sh[i]) || sh[i].sh_link >= nsec ||
            !section_in_file(m, &sh[sh[i].sh_link]))
            continue;
        const Elf64_Sym *st = (const Elf64_Sym *)((const char *)m->base + sh[i].sh_offset);
        size_t n = sh[i].sh_size / sizeof *st;
        const char *strtab = (const char *)m->base + sh[sh[i].sh_link].sh_offset;
        size_t strsize = sh[sh[i].sh_link].sh_size;
        long found = 0;
        for (size_t j = 0; j < n; j++) {
            if (ELF64_ST_TYPE(st[j].st_info) != STT_FUNC || st[j].st_shndx == SHN_UNDEF ||
                st[j].st_value == 0 || st[j].st_name >= strsize)
                continue;
            const char *name = strtab + st[j].st_name;
            if (memchr(name, '\0', strsize - st[j].st_name) == NULL || name[0] == '\0')
                continue;
            if (mod->nsyms == *cap) {
                size_t ncap = *cap ? *cap * 2 : 256;
                struct sym *s = realloc(mod->syms, ncap * sizeof *s);
                if (s == NULL)
                    return -1;
                mod->syms = s;
                *cap = ncap;
            }
            mod->syms[mod->nsyms++] = (struct sym){
                .addr = st[j].st_value,
                .size = st[j].st_size,
                .name = name,
                .rank = name_rank(name, ELF64_ST_BIND(st[j].st_info)),
            };
            found++;
        }
        return found;
    }
    return 0;
}

/* /usr/lib/debug/.build-id/xx/yyyy.debug for the object's NT_GNU_BUILD_ID. */
static bool debug_file_path(const struct file_map *m, char *out, size_t size)
{
    size_t nsec;
    const Elf64_Shdr *sh = elf_sections(m, &nsec);
    if (sh == NULL)
        return false;
    for (size_t i = 0; i < nsec; i++) {
        if (sh[i].sh_type != SHT_NOTE || !section_in_file(m, &sh[i]))
            continue;
        const char *p = (const char *)m->base + sh[i].sh_offset;
        const char *end = p + sh[i].sh_size;
        while ((size_t)(end - p) >= sizeof(Elf64_Nhdr)) {
            const Elf64_Nhdr *nh = (const Elf64_Nhdr *)p;
            size_t namesz = (nh->n_namesz + 3u) & ~3u, descsz = (nh->n_descsz + 3u) & ~3u;
            const unsigned char *desc = (const unsigned char *)p + sizeof *nh + namesz;
            if ((size_t)(end - p) < sizeof *nh + namesz + descsz)
                break;
            if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 &&
                memcmp(p + sizeof *nh, "GNU", 4) == 0 && nh->n_descsz >= 2 && nh->n_descsz <= 64) {
                static const char hex[] = "0123456789abcdef";
                char id[160];
                size_t k = 0;
                for (uint32_t b = 0; b < nh->n_descsz; b++) {
                    id[k++] = hex[desc[b] >> 4];
                    id[k++] = hex[desc[b] & 15];
                    if (b == 0)
                        id[k++] = '/';
                }
                id[k] = '\0';
                return mtx_format(out, size, "/usr/lib/debug/.build-id/%s.debug", id) < size - 1;
            }
            p += sizeof *nh + namesz + descsz;
        }
    }
    return false;
}

static int sym_cmp(const void *a, const void *b)
{
    const struct sym *x = a, *y = b;
    if (x->addr != y->addr)
        return x->addr < y->addr ? -1 : 1;
    return y->rank - x->rank;
}

static void module_free(struct module *mod)
{
    for (size_t i = 0; i < MTX_ARRAY_SIZE(mod->maps); i++)
        if (mod->maps[i].base != NULL)
            munmap(mod->maps[i].base, mod->maps[i].len);
    free(mod->syms);
    free(mod->path);
    free(mod);
}

/* Finds or loads the module at path; NULL only when out of memory. A file that
 * cannot be read is cached too, with no symbols, so it is tried once. */
static struct module *module_get(const char *path)
{
    for (struct module *m = modules; m != NULL; m = m->next)
        if (strcmp(m->path, path) == 0)
            return m;
    struct module *mod = calloc(1, sizeof *mod);
    if (mod == NULL || (mod->path = strdup(path)) == NULL) {
        free(mod);
        return NULL;
    }
    size_t cap = 0;
    if (map_file(path, &mod->maps[0])) {
        long n = add_symbols(mod, &mod->maps[0], SHT_SYMTAB, &cap);
        char dbg[MT_SYM_PATH_MAX];
        if (n == 0 && debug_file_path(&mod->maps[0], dbg, sizeof dbg) &&
            map_file(dbg, &mod->maps[1]))
            n = add_symbols(mod, &mod->maps[1], SHT_SYMTAB, &cap);
        if (n >= 0)
            n = add_symbols(mod, &mod->maps[0], SHT_DYNSYM, &cap);
        if (n < 0) {
            module_free(mod);
            return NULL;
        }
        qsort(mod->syms, mod->nsyms, sizeof *mod->syms, sym_cmp);
    }
    mod->next = modules;
    modules = mod;
    return mod;
}

static bool sym_contains(const struct sym *s, uint64_t addr)
{
    return addr >= s->addr && addr - s->addr < s->size;
}

static const char *module_function(const struct module *mod, uint64_t addr)
{
    size_t lo = 0, hi = mod->nsyms;
    while (lo < hi) { /* first symbol above addr */
        size_t mid = lo + (hi - lo) / 2;
        if (mod->syms[mid].addr <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return NULL;
    /* Nested or overlapping symbols: take the nearest one that contains addr, then
     * its best-ranked alias at the same address. */
    size_t last = lo - 1;
    for (size_t i = last + 1, seen = 0; i-- > 0 && seen < 64; seen++) {
        if (!sym_contains(&mod->syms[i], addr))
            continue;
        while (i > 0 && mod->syms[i - 1].addr == mod->syms[i].addr &&
               sym_contains(&mod->syms[i - 1], addr))
            i--;
        return mod->syms[i].name;
    }
    /* Sizeless symbols (hand-written assembly) own everything up to the next. */
    if (mod->syms[last].size == 0) {
        size_t i = last;
        while (i > 0 && mod->syms[i - 1].addr == mod->syms[i].addr)
            i--;
        return mod->syms[i].name;
    }
    return NULL;
}

struct phdr_query {
    uintptr_t addr;
    bool found;
    uintptr_t bias;
    char name[MT_SYM_PATH_MAX];
};

static int phdr_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    struct phdr_query *q = data;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD)
            continue;
        uintptr_t start = info->dlpi_addr + ph->p_vaddr;
        if (q->addr >= start && q->addr - start < ph->p_memsz) {
            q->found = true;
            q->bias = info->dlpi_addr;
            const char *name = info->dlpi_name ? info->dlpi_name : "";
            mtx_format(q->name, sizeof q->name, "%s", name);
            return 1;
        }
    }
    return 0;
}

static void copy_str(char *dst, size_t size, const char *src)
{
    mtx_format(dst, size, "%s", src ? src : "");
}

#if MEMTRACE_HAVE_LIBDW
static Dwfl *dwfl;

static Dwfl *dwfl_process(void)
{
    static const Dwfl_Callbacks callbacks = {
        .find_elf = dwfl_linux_proc_find_elf,
        .find_debuginfo = dwfl_standard_find_debuginfo,
    };
    if (dwfl == NULL) {
        dwfl = dwfl_begin(&callbacks);
        if (dwfl == NULL)
            return NULL;
    }
    dwfl_report_begin(dwfl);
    int rc = dwfl_linux_proc_report(dwfl, getpid());
    dwfl_report_end(dwfl, NULL, NULL);
    if (rc != 0) {
        dwfl_end(dwfl);
        dwfl = NULL;
    }
    return dwfl;
}
#endif

#if MEMTRACE_HAVE_LIBDW
/* Whether a function described in DWARF contains addr. For code without debug
 * information (crt's _start, say) libdw still answers with the nearest line of a
 * unit whose ranges happen to span it, which would be a wrong file and line. */
static int in_function(Dwfl_Module *mod, Dwarf_Addr addr)
{
    Dwarf_Addr bias;
    Dwarf_Die *cu = dwfl_module_addrdie(mod, addr, &bias);
    if (cu == NULL)
        return 0;
    Dwarf_Die *scopes = NULL;
    int n = dwarf_getscopes(cu, addr - bias, &scopes);
    int found = 0;
    for (int i = 0; i < n && !found; i++) {
        int tag = dwarf_tag(&scopes[i]);
        found = tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine;
    }
    free(scopes);
    return found;
}
#endif

/* File, line and (as a fallback) function of addr from DWARF. */
static void dwarf_lookup(uintptr_t addr, struct mt_symbol *out)
{
#if MEMTRACE_HAVE_LIBDW
    Dwfl_Module *mod = NULL;
    if (dwfl != NULL)
        mod = dwfl_addrmodule(dwfl, addr);
    /* Not seen yet: the process view is refreshed for objects loaded since. */
    if (mod == NULL && dwfl_process() != NULL)
        mod = dwfl_addrmodule(dwfl, addr);
    if (mod == NULL)
        return;
    Dwfl_Line *line = in_function(mod, addr) ? dwfl_module_getsrc(mod, addr) : NULL;
    Dwarf_Addr at;
    int lineno = 0, col;
    const char *file = line ? dwfl_lineinfo(line, &at, &lineno, &col, NULL, NULL) : NULL;
    if (file != NULL && lineno > 0) {
        copy_str(out->file, sizeof out->file, file);
        out->line = (uint32_t)lineno;
    }
    if (out->function[0] == '\0')
        copy_str(out->function, sizeof out->function, dwfl_module_addrname(mod, addr));
#else
    (void)addr;
    (void)out;
#endif
}

int mt_symbolize(uintptr_t ip, struct mt_symbol *out)
{
    memset(out, 0, sizeof *out);
    if (ip == 0)
        return -1;
    /* A return address may sit just past the end of its function (a call to a
     * noreturn function): the call site is ip - 1. */
    struct phdr_query q = {.addr = ip - 1};
    dl_iterate_phdr(phdr_cb, &q);
    if (!q.found)
        return -1;

    pthread_mutex_lock(&sym_lock);
    if (q.name[0] == '\0') {
        ssize_t n = readlink("/proc/self/exe", q.name, sizeof q.name - 1);
        q.name[n > 0 ? n : 0] = '\0';
    }
    copy_str(out->module, sizeof out->module, q.name);
    out->offset = ip - q.bias;
    struct module *mod = q.name[0] ? module_get(q.name) : NULL;
    if (mod != NULL)
        copy_str(out->function, sizeof out->function, module_function(mod, out->offset - 1));
    if (have_libdw)
        dwarf_lookup(ip - 1, out);
    pthread_mutex_unlock(&sym_lock);
    return 0;
}

void mt_symbolize_reset(void)
{
    pthread_mutex_lock(&sym_lock);
    while (modules != NULL) {
        struct module *next = modules->next;
        module_free(modules);
        modules = next;
    }
#if MEMTRACE_HAVE_LIBDW
    if (dwfl != NULL) {
        dwfl_end(dwfl);
        dwfl = NULL;
    }
#endif
    pthread_mutex_unlock(&sym_lock);
}
