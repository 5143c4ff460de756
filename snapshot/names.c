#include "config.h"

#include "memtrace.h"

#include <string.h>

static const char *const action_names[MEMTRACE_ACTION_COUNT] = {
    [MEMTRACE_ALLOC] = "alloc",
    [MEMTRACE_FREE_REQUESTED] = "free_requested",
    [MEMTRACE_FREE_COMPLETED] = "free_completed",
    [MEMTRACE_SEGMENT_ALLOC] = "segment_alloc",
    [MEMTRACE_SEGMENT_FREE] = "segment_free",
    [MEMTRACE_SEGMENT_MAP] = "segment_map",
    [MEMTRACE_SEGMENT_UNMAP] = "segment_unmap",
    [MEMTRACE_SNAPSHOT] = "snapshot",
    [MEMTRACE_OOM] = "oom",
    [MEMTRACE_ANNOTATE] = "annotate",
    [MEMTRACE_COUNTER] = "counter",
};

const char *memtrace_action_name(int action)
{
    if (action < 0 || action >= MEMTRACE_ACTION_COUNT)
        return NULL;
    return action_names[action];
}

int memtrace_action_from_name(const char *name)
{
    for (int i = 0; name != NULL && i < MEMTRACE_ACTION_COUNT; i++)
        if (strcmp(action_names[i], name) == 0)
            return i;
    return -1;
}

const char *memtrace_strerror(int err)
{
    switch (err) {
    case MEMTRACE_OK:
        return "success";
    case MEMTRACE_EINVAL:
        return "invalid argument";
    case MEMTRACE_ENOMEM:
        return "out of host memory";
    case MEMTRACE_EIO:
        return "input/output error";
    case MEMTRACE_EFORMAT:
        return "not a memtrace file, or a corrupt one";
    case MEMTRACE_ETRUNC:
        return "file is truncated";
    case MEMTRACE_ESTATE:
        return "not allowed in the current state";
    case MEMTRACE_ENODEV:
        return "no such device, or its backend is not available";
    case MEMTRACE_EOOM:
        return "device out of memory";
    case MEMTRACE_ECONFIG:
        return "invalid configuration";
    case MEMTRACE_ENOTSUP:
        return "not supported";
    case MEMTRACE_EVERSION:
        return "file written by a newer memtrace format version";
    default:
        return "unknown error";
    }
}

const char *memtrace_version(void)
{
    return PACKAGE_VERSION;
}
