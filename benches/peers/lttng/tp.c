/* The provider's probes, and the two calls the benchmark makes (not
 * inlined into Rust: a call, as tape's rows call a function). */
#define LTTNG_UST_TRACEPOINT_CREATE_PROBES
#define LTTNG_UST_TRACEPOINT_DEFINE
#include "tp.h"

void tape_peers_lttng_request(uint64_t a, uint64_t b, const char *s)
{
    lttng_ust_tracepoint(bench, request, a, b, s);
}

void tape_peers_lttng_request_off(uint64_t a, uint64_t b, const char *s)
{
    lttng_ust_tracepoint(bench, request_off, a, b, s);
}
