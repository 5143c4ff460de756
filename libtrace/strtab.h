/* strtab.h: the recorder's string table. Ids start at 1 (0 = none) and are stable
 * for the life of the process. Thread-safe, mmap'd storage, no libc malloc. */
#ifndef MEMTRACE_STRTAB_H
#define MEMTRACE_STRTAB_H

#include <stdint.h>

uint32_t mt_strings_intern(const char *s);
uint32_t mt_strings_count(void);
/* The string with id (1..count), or "" for 0 or an unknown id. */
const char *mt_strings_get(uint32_t id);
void mt_strings_atfork_child(void);

#endif
