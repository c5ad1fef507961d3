/* The recording profiler plugin: a test plugin that writes every call it gets, one line
 * each, to RECORDING_PROFILER_FILE.<pid>, so that tests can compare what a plugin sees
 * when NCCL (nccl-sim) loads it directly with what it sees chained behind nccl-scorep.
 *
 * It exports ncclProfiler_v1 ... ncclProfiler_v<RECORDING_NEWEST> (7 unless built with
 * -DRECORDING_NEWEST=N). Its contexts and handles are numbered tokens, never pointers
 * (c<n>, h<n> in the file; "-" is NULL, "x" a value it never gave).
 *
 * Lines:  I <version> c<ctx> <mask> <rank> <nranks> <comm>     init
 *         S c<ctx> h<handle> <parent> <type> <rank> <fields>   startEvent
 *         R h<handle> <state>                                  recordEventState
 *         E h<handle>                                          stopEvent
 *         F c<ctx>                                             finalize
 *         X init <error>                                       init returned an error
 *
 * Settings (environment, read at the first init):
 *   RECORDING_PROFILER_MASK         activation mask to ask for (default 0xFFFF)
 *   RECORDING_PROFILER_INIT_ERROR   the n-th init of the process (1, 2, ...) returns an error
 *   RECORDING_PROFILER_NULL_TYPES   type bits whose startEvent gives NULL and an error
 *   RECORDING_PROFILER_STOP_ERROR   1: stopEvent returns an error
 *   RECORDING_PROFILER_RECORD_ERROR 1: recordEventState returns an error */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef RECORDING_NEWEST
#define RECORDING_NEWEST 7
#endif

#define EXPORT __attribute__((visibility("default")))
#define ERROR_RESULT 3 /* ncclInternalError */
#define CONTEXT_BASE 0x3c000000000000ULL
#define HANDLE_BASE 0x3d000000000000ULL
/* Tokens carry the pid, so that another process's (PXN) read as "x". */
#define TOKEN_RANGE 0x10000000ULL
#define PROCESS_BASE(base) ((base) + ((uint64_t)getpid() << 28))

typedef int ncclResult_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static FILE *out;
static int configured;
static int mask_setting = 0xFFFF;
static long init_error_at;
static uint64_t null_types;
static int stop_error, record_error;
static long inits, contexts, handles;
/* The API version NCCL called init with (the same for every init of a process). */
static int process_version;

static long env_number(const char *name, long fallback) {
    const char *value = getenv(name);
    return value && *value ? strtol(value, NULL, 0) : fallback;
}

/* Called with the lock held. */
static void configure(void) {
    if (configured)
        return;
    configured = 1;
    mask_setting = (int)env_number("RECORDING_PROFILER_MASK", 0xFFFF);
    init_error_at = env_number("RECORDING_PROFILER_INIT_ERROR", 0);
    null_types = (uint64_t)env_number("RECORDING_PROFILER_NULL_TYPES", 0);
    stop_error = (int)env_number("RECORDING_PROFILER_STOP_ERROR", 0);
    record_error = (int)env_number("RECORDING_PROFILER_RECORD_ERROR", 0);
    const char *prefix = getenv("RECORDING_PROFILER_FILE");
    if (prefix && *prefix) {
        char path[4096];
        snprintf(path, sizeof path, "%s.%d", prefix, (int)getpid());
        out = fopen(path, "a");
        if (out)
            setvbuf(out, NULL, _IOLBF, 0);
    }
}

static void token(char *buf, size_t size, const void *value, uint64_t base, char letter) {
    uint64_t v = (uint64_t)(uintptr_t)value;
    if (!v)
        snprintf(buf, size, "-");
    else if (v > PROCESS_BASE(base) && v < PROCESS_BASE(base) + TOKEN_RANGE)
        snprintf(buf, size, "%c%" PRIu64, letter, v - PROCESS_BASE(base));
    else
        snprintf(buf, size, "x");
}

static ncclResult_t init_common(int version, void **context, int *mask, uint64_t comm,
                                int nranks, int rank) {
    pthread_mutex_lock(&lock);
    configure();
    long n = ++inits;
    if (init_error_at && n == init_error_at) {
        if (out)
            fprintf(out, "X init %d\n", ERROR_RESULT);
        pthread_mutex_unlock(&lock);
        *context = NULL;
        return ERROR_RESULT;
    }
    long id = ++contexts;
    process_version = version;
    *context = (void *)(uintptr_t)(PROCESS_BASE(CONTEXT_BASE) + (uint64_t)id);
    *mask = mask_setting;
    if (out)
        fprintf(out, "I %d c%ld %#x %d %d %#" PRIx64 "\n", version, id, mask_setting, rank,
                nranks, comm);
    pthread_mutex_unlock(&lock);
    return 0;
}

#define INIT_V1(v)                                                                        \
    static ncclResult_t init_v##v(void **context, int *mask) {                            \
        return init_common(v, context, mask, 0, -1, -1);                                  \
    }
INIT_V1(1)
INIT_V1(2)
INIT_V1(3)

static ncclResult_t init_v4(void **context, int *mask, const char *name, uint64_t hash,
                            int nNodes, int nRanks, int rank, void *logfn) {
    (void)name, (void)nNodes, (void)logfn;
    return init_common(4, context, mask, hash, nRanks, rank);
}

#define INIT_V5(v)                                                                        \
    static ncclResult_t init_v##v(void **context, uint64_t id, int *mask, const char *name, \
                                  int nNodes, int nRanks, int rank, void *logfn) {        \
        (void)name, (void)nNodes, (void)logfn;                                            \
        return init_common(v, context, mask, id, nRanks, rank);                           \
    }
INIT_V5(5)
INIT_V5(6)
INIT_V5(7)

static const char *str(const unsigned char *descr, size_t offset) {
    const char *s;
    memcpy(&s, descr + offset, sizeof s);
    return s ? s : "-";
}

#define FIELD(type, offset) (*(const type *)(descr + (offset)))

/* The fields of the descriptor that identify an event (offsets per API version). */
static void fields(char *buf, size_t size, int version, uint64_t type,
                   const unsigned char *descr) {
    int v4 = version >= 4;
    switch (type) {
    case 1 << 1: /* Coll */
        if (version == 1)
            snprintf(buf, size, "seq=%" PRIu64 " func=%u count=%zu", FIELD(uint64_t, 40),
                     FIELD(uint8_t, 48), FIELD(size_t, 72));
        else
            snprintf(buf, size, "seq=%" PRIu64 " func=%s count=%zu",
                     FIELD(uint64_t, v4 ? 24 : 40), str(descr, v4 ? 32 : 48),
                     FIELD(size_t, v4 ? 56 : 72));
        break;
    case 1 << 2: /* P2p */
        if (version == 1)
            snprintf(buf, size, "func=%u count=%zu peer=%d", FIELD(uint8_t, 40),
                     FIELD(size_t, 64), FIELD(int, 72));
        else
            snprintf(buf, size, "func=%s count=%zu peer=%d", str(descr, v4 ? 24 : 40),
                     FIELD(size_t, v4 ? 48 : 64), FIELD(int, v4 ? 56 : 72));
        break;
    case 1 << 3: /* ProxyOp */
        snprintf(buf, size, "pid=%s channel=%u peer=%d steps=%d send=%d",
                 FIELD(int, 24) == (int)getpid() ? "self" : "other", FIELD(uint8_t, 28),
                 FIELD(int, 32), FIELD(int, 36), FIELD(int, 44));
        break;
    case 1 << 4: /* ProxyStep */
        snprintf(buf, size, "step=%d", FIELD(int, 24));
        break;
    case 1 << 6: /* KernelCh */
        snprintf(buf, size, "channel=%u", FIELD(uint8_t, 24));
        break;
    case 1 << 7: /* NetPlugin */
        snprintf(buf, size, "id=%#" PRIx64, FIELD(uint64_t, 24));
        break;
    case 1 << 8: /* GroupApi */
        snprintf(buf, size, "depth=%d", FIELD(int, 28));
        break;
    case 1 << 9:  /* CollApi */
    case 1 << 10: /* P2pApi */
        snprintf(buf, size, "func=%s count=%zu", str(descr, 24), FIELD(size_t, 32));
        break;
    case 1 << 12: /* CeColl */
        snprintf(buf, size, "seq=%" PRIu64 " func=%s", FIELD(uint64_t, 24), str(descr, 32));
        break;
    case 1 << 15: /* KernelPhase */
        snprintf(buf, size, "channel=%u phase=%u", FIELD(uint8_t, 24), FIELD(uint8_t, 25));
        break;
    default:
        snprintf(buf, size, ".");
    }
}

static ncclResult_t start_event(void *context, void **handle, void *descr_ptr) {
    const unsigned char *descr = descr_ptr;
    *handle = NULL;
    pthread_mutex_lock(&lock);
    configure();
    char ctx[32], parent[32], text[256];
    token(ctx, sizeof ctx, context, CONTEXT_BASE, 'c');
    int version = process_version ? process_version : RECORDING_NEWEST;
    uint64_t type = version >= 5 ? FIELD(uint64_t, 0) : FIELD(uint8_t, 0);
    void *parent_value;
    memcpy(&parent_value, descr + 8, sizeof parent_value);
    token(parent, sizeof parent, parent_value, HANDLE_BASE, 'h');
    fields(text, sizeof text, version, type, descr);
    ncclResult_t result = 0;
    char id[32] = "-";
    if (type & null_types) {
        result = ERROR_RESULT;
    } else {
        long n = ++handles;
        *handle = (void *)(uintptr_t)(PROCESS_BASE(HANDLE_BASE) + (uint64_t)n);
        snprintf(id, sizeof id, "h%ld", n);
    }
    if (out)
        fprintf(out, "S %s %s %s %#" PRIx64 " %d %s\n", ctx, id, parent, type,
                FIELD(int, 16), text);
    pthread_mutex_unlock(&lock);
    return result;
}

static ncclResult_t stop_event(void *handle) {
    char id[32];
    token(id, sizeof id, handle, HANDLE_BASE, 'h');
    pthread_mutex_lock(&lock);
    if (out)
        fprintf(out, "E %s\n", id);
    pthread_mutex_unlock(&lock);
    return stop_error ? ERROR_RESULT : 0;
}

static ncclResult_t record_event_state(void *handle, int state, void *args) {
    (void)args;
    char id[32];
    token(id, sizeof id, handle, HANDLE_BASE, 'h');
    pthread_mutex_lock(&lock);
    if (out)
        fprintf(out, "R %s %d\n", id, state);
    pthread_mutex_unlock(&lock);
    return record_error ? ERROR_RESULT : 0;
}

static ncclResult_t finalize(void *context) {
    char ctx[32];
    token(ctx, sizeof ctx, context, CONTEXT_BASE, 'c');
    pthread_mutex_lock(&lock);
    if (out)
        fprintf(out, "F %s\n", ctx);
    pthread_mutex_unlock(&lock);
    return 0;
}

#define TABLE(init_type)                                                                  \
    struct {                                                                              \
        const char *name;                                                                 \
        init_type init;                                                                   \
        ncclResult_t (*startEvent)(void *, void **, void *);                              \
        ncclResult_t (*stopEvent)(void *);                                                \
        ncclResult_t (*recordEventState)(void *, int, void *);                            \
        ncclResult_t (*finalize)(void *);                                                 \
    }
#define ENTRY(init_fn)                                                                    \
    {"recording", init_fn, start_event, stop_event, record_event_state, finalize}

typedef ncclResult_t (*init_v1_t)(void **, int *);
typedef ncclResult_t (*init_v4_t)(void **, int *, const char *, uint64_t, int, int, int, void *);
typedef ncclResult_t (*init_v5_t)(void **, uint64_t, int *, const char *, int, int, int, void *);

EXPORT const TABLE(init_v1_t) ncclProfiler_v1 = ENTRY(init_v1);
EXPORT const TABLE(init_v1_t) ncclProfiler_v2 = ENTRY(init_v2);
EXPORT const TABLE(init_v1_t) ncclProfiler_v3 = ENTRY(init_v3);
EXPORT const TABLE(init_v4_t) ncclProfiler_v4 = ENTRY(init_v4);
EXPORT const TABLE(init_v5_t) ncclProfiler_v5 = ENTRY(init_v5);
#if RECORDING_NEWEST >= 6
EXPORT const TABLE(init_v5_t) ncclProfiler_v6 = ENTRY(init_v6);
#endif
#if RECORDING_NEWEST >= 7
EXPORT const TABLE(init_v5_t) ncclProfiler_v7 = ENTRY(init_v7);
#endif
