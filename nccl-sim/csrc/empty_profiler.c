/* The empty profiler plugin: the floor `nccl-sim bench` measures every plugin against.
 * It exports ncclProfiler_v1 ... ncclProfiler_v7 and does the least NCCL needs: init
 * writes a non-NULL context and asks for every event (mask 0xFFFF), startEvent writes a
 * constant non-NULL handle, everything else returns ncclSuccess (0). Built by build.rs
 * into its own shared object, so it is called across a shared-object boundary exactly
 * like any other plugin. */
#include <stdint.h>

#define EXPORT __attribute__((visibility("default")))
#define ALL_EVENTS 0xFFFF

typedef int ncclResult_t;

static int context_token;
static int handle_token;

static ncclResult_t init_v1(void **context, int *mask) {
    *context = &context_token;
    *mask = ALL_EVENTS;
    return 0;
}

static ncclResult_t init_v4(void **context, int *mask, const char *name, uint64_t hash,
                            int nNodes, int nRanks, int rank, void *logfn) {
    (void)name, (void)hash, (void)nNodes, (void)nRanks, (void)rank, (void)logfn;
    return init_v1(context, mask);
}

static ncclResult_t init_v5(void **context, uint64_t id, int *mask, const char *name,
                            int nNodes, int nRanks, int rank, void *logfn) {
    (void)id, (void)name, (void)nNodes, (void)nRanks, (void)rank, (void)logfn;
    return init_v1(context, mask);
}

static ncclResult_t start_event(void *context, void **handle, void *descr) {
    (void)context, (void)descr;
    *handle = &handle_token;
    return 0;
}

static ncclResult_t stop_event(void *handle) { (void)handle; return 0; }

static ncclResult_t record_event_state(void *handle, int state, void *args) {
    (void)handle, (void)state, (void)args;
    return 0;
}

static ncclResult_t finalize(void *context) { (void)context; return 0; }

/* 6 pointer slots, the same in every version; only init's signature differs. */
#define TABLE(init_type)                                                                  \
    struct {                                                                              \
        const char *name;                                                                 \
        init_type init;                                                                   \
        ncclResult_t (*startEvent)(void *, void **, void *);                              \
        ncclResult_t (*stopEvent)(void *);                                                \
        ncclResult_t (*recordEventState)(void *, int, void *);                            \
        ncclResult_t (*finalize)(void *);                                                 \
    }
#define ENTRY(init_fn) {"empty", init_fn, start_event, stop_event, record_event_state, finalize}

typedef ncclResult_t (*init_v1_t)(void **, int *);
typedef ncclResult_t (*init_v4_t)(void **, int *, const char *, uint64_t, int, int, int, void *);
typedef ncclResult_t (*init_v5_t)(void **, uint64_t, int *, const char *, int, int, int, void *);

typedef TABLE(init_v1_t) table_v1_t;
typedef TABLE(init_v4_t) table_v4_t;
typedef TABLE(init_v5_t) table_v5_t;

EXPORT const table_v1_t ncclProfiler_v1 = ENTRY(init_v1);
EXPORT const table_v1_t ncclProfiler_v2 = ENTRY(init_v1);
EXPORT const table_v1_t ncclProfiler_v3 = ENTRY(init_v1);
EXPORT const table_v4_t ncclProfiler_v4 = ENTRY(init_v4);
EXPORT const table_v5_t ncclProfiler_v5 = ENTRY(init_v5);
EXPORT const table_v5_t ncclProfiler_v6 = ENTRY(init_v5);
EXPORT const table_v5_t ncclProfiler_v7 = ENTRY(init_v5);
