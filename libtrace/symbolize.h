/* symbolize.h: turning captured return addresses into module, function, file, line.
 *
 * Off the hot path only (it may allocate and read files): the recorder calls it once
 * per distinct frame when it writes a chunk or a snapshot. Function names come from
 * the ELF symbol tables (.symtab, then .dynsym) of the module mapped at that address;
 * file and line from DWARF when built with libdw. */
#ifndef MEMTRACE_SYMBOLIZE_H
#define MEMTRACE_SYMBOLIZE_H

#include <stdint.h>

#define MT_SYM_PATH_MAX 512
#define MT_SYM_NAME_MAX 512

struct mt_symbol {
    char module[MT_SYM_PATH_MAX];   /* path of the mapped object, "" if unknown */
    uint64_t offset;                /* ip minus the module's load bias */
    char function[MT_SYM_NAME_MAX]; /* symbol name (not demangled), "" if unknown */
    char file[MT_SYM_PATH_MAX];     /* source file, "" if unknown */
    uint32_t line;                  /* 0 if unknown */
};

/* Resolves return address ip of this process (looking up ip - 1, the call site,
 * for function and line). Fills every field it can; returns 0 if at least the
 * module was found, -1 otherwise (out is still filled with empty strings). */
int mt_symbolize(uintptr_t ip, struct mt_symbol *out);

/* Drops cached module data (e.g. after dlclose); safe to call at any time. */
void mt_symbolize_reset(void);

#endif
