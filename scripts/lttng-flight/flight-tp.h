/* The LTTng-UST twin of tape's `flight.event` (crates/tape/examples/flight.rs):
 * the same four fields, for scripts/record-rate.sh's side-by-side run. */
#undef LTTNG_UST_TRACEPOINT_PROVIDER
#define LTTNG_UST_TRACEPOINT_PROVIDER flight

#undef LTTNG_UST_TRACEPOINT_INCLUDE
#define LTTNG_UST_TRACEPOINT_INCLUDE "./flight-tp.h"

#if !defined(FLIGHT_TP_H) || defined(LTTNG_UST_TRACEPOINT_HEADER_MULTI_READ)
#define FLIGHT_TP_H

#include <lttng/tracepoint.h>

LTTNG_UST_TRACEPOINT_EVENT(
    flight, event,
    LTTNG_UST_TP_ARGS(uint32_t, thread, uint64_t, seq, const char *, text, size_t, len, uint64_t, sum),
    LTTNG_UST_TP_FIELDS(
        lttng_ust_field_integer(uint32_t, thread, thread)
        lttng_ust_field_integer(uint64_t, seq, seq)
        lttng_ust_field_sequence_text(char, text, text, uint32_t, len)
        lttng_ust_field_integer(uint64_t, sum, sum)
    )
)

#endif

#include <lttng/tracepoint-event.h>
