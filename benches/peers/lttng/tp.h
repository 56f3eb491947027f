/* The LTTng-UST tracepoint provider of the peer benchmark: the same event
 * as tape's `bench.peers.request` (two 64-bit integers and a string), and
 * one never enabled. Built by build.rs when liblttng-ust-dev is installed. */
#undef LTTNG_UST_TRACEPOINT_PROVIDER
#define LTTNG_UST_TRACEPOINT_PROVIDER bench

#undef LTTNG_UST_TRACEPOINT_INCLUDE
#define LTTNG_UST_TRACEPOINT_INCLUDE "./tp.h"

#if !defined(TAPE_PEERS_TP_H) || defined(LTTNG_UST_TRACEPOINT_HEADER_MULTI_READ)
#define TAPE_PEERS_TP_H

#include <lttng/tracepoint.h>
#include <stdint.h>

LTTNG_UST_TRACEPOINT_EVENT(
    bench, request,
    LTTNG_UST_TP_ARGS(uint64_t, a, uint64_t, b, const char *, s),
    LTTNG_UST_TP_FIELDS(
        lttng_ust_field_integer(uint64_t, a, a)
        lttng_ust_field_integer(uint64_t, b, b)
        lttng_ust_field_string(s, s)
    )
)

LTTNG_UST_TRACEPOINT_EVENT(
    bench, request_off,
    LTTNG_UST_TP_ARGS(uint64_t, a, uint64_t, b, const char *, s),
    LTTNG_UST_TP_FIELDS(
        lttng_ust_field_integer(uint64_t, a, a)
        lttng_ust_field_integer(uint64_t, b, b)
        lttng_ust_field_string(s, s)
    )
)

#endif

#include <lttng/tracepoint-event.h>
