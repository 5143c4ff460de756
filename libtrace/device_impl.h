/* device_impl.h: the backend interface behind memtrace_device.h.
 *
 * device.c owns the public objects (devices, streams, events), the registry of
 * opened devices and the lists that let close() tear down what the user left
 * behind; a backend only fills the impl pointers through the ops table. A NULL
 * stream (the default stream) reaches the backend as NULL. */
#ifndef MEMTRACE_DEVICE_IMPL_H
#define MEMTRACE_DEVICE_IMPL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "memtrace_device.h"

struct mt_device_ops;

struct memtrace_device {
    const struct mt_device_ops *ops;
    void *impl;
    const char *backend;
    char name[128];
    int index;
    int refs;   /* under the registry lock */
    int shared; /* in the registry (memtrace_device_open), not open_host */
    size_t granularity;
    pthread_mutex_t lock; /* guards the stream and event lists */
    struct memtrace_stream *streams;
    struct memtrace_devevent *events;
    struct memtrace_device *next; /* registry */
};

struct memtrace_stream {
    struct memtrace_device *dev;
    void *impl;
    uint64_t id;
    struct memtrace_stream *prev, *next;
};

struct memtrace_devevent {
    struct memtrace_device *dev;
    void *impl;
    struct memtrace_devevent *prev, *next;
};

/* Every op returns 0 or a negative MEMTRACE_E* code. open() fills d->impl, d->name
 * and d->granularity. Streams and events get the public object to fill ->impl (and
 * ->id for streams); a NULL stream is the device's default stream. */
struct mt_device_ops {
    const char *name;
    int (*open)(struct memtrace_device *d, int index);
    void (*close)(struct memtrace_device *d);
    int (*mem_info)(struct memtrace_device *d, uint64_t *free_bytes, uint64_t *total_bytes);
    int (*malloc)(struct memtrace_device *d, size_t size, uint64_t *addr);
    int (*free)(struct memtrace_device *d, uint64_t addr);
    int (*reserve)(struct memtrace_device *d, size_t size, uint64_t *addr);
    int (*release)(struct memtrace_device *d, uint64_t addr, size_t size);
    int (*map)(struct memtrace_device *d, uint64_t addr, size_t size);
    int (*unmap)(struct memtrace_device *d, uint64_t addr, size_t size);
    void *(*ptr)(struct memtrace_device *d, uint64_t addr);
    int (*stream_create)(struct memtrace_device *d, struct memtrace_stream *s);
    int (*stream_destroy)(struct memtrace_device *d, struct memtrace_stream *s);
    int (*launch)(struct memtrace_device *d, struct memtrace_stream *s, memtrace_kernel_fn fn,
                  void *arg);
    int (*stream_sync)(struct memtrace_device *d, struct memtrace_stream *s);
    int (*event_create)(struct memtrace_device *d, struct memtrace_devevent *e);
    int (*event_destroy)(struct memtrace_device *d, struct memtrace_devevent *e);
    int (*event_record)(struct memtrace_device *d, struct memtrace_devevent *e,
                        struct memtrace_stream *s);
    int (*event_query)(struct memtrace_device *d, struct memtrace_devevent *e);
    int (*event_sync)(struct memtrace_device *d, struct memtrace_devevent *e);
    int (*stream_wait)(struct memtrace_device *d, struct memtrace_stream *s,
                       struct memtrace_devevent *e);
    int (*device_sync)(struct memtrace_device *d);
};

extern const struct mt_device_ops mt_device_host_ops;
extern const struct mt_device_ops mt_device_cuda_ops;
extern const struct mt_device_ops mt_device_ze_ops;

/* The host backend's capacity for the next open (0 = MEMTRACE_HOST_CAPACITY). */
int mt_device_host_open_capacity(struct memtrace_device *d, uint64_t capacity);

/* Parses "<digits>[K|M|G|T][B|iB]" (binary multiples) into *out. 0 or MEMTRACE_ECONFIG. */
int mt_device_parse_size(const char *s, uint64_t *out);

/* An in-order work queue served by one host thread: the host backend's streams, and
 * the host side of Level Zero streams. run() is called on the worker for each item. */
struct mt_workq;
int mt_workq_create(struct mt_workq **out);
/* Drains the queue, stops and joins the worker, frees q. */
void mt_workq_destroy(struct mt_workq *q);
int mt_workq_push(struct mt_workq *q, memtrace_kernel_fn fn, void *arg);
/* Waits until everything pushed before the call has run. */
void mt_workq_sync(struct mt_workq *q);

#endif
