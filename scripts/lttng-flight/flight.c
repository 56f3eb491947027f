/* The LTTng-UST twin of tape's flight example (crates/tape/examples/flight.rs),
 * for scripts/record-rate.sh: THREADS threads each emit `flight:event`
 * (thread, seq, a text of 0 to 47 bytes, its FNV-1a checksum) as tape's
 * does, at RATE events a second together (each thread on its own share's
 * schedule, checked every 256 events, as tape's `--rate`; 0: as fast as
 * it can), for SECONDS after DELAY ms; at
 * the end it says on stderr how many events it emitted, in tape's words.
 *
 *   flight THREADS SECONDS RATE DELAY_MS
 */
#define LTTNG_UST_TRACEPOINT_DEFINE
#define LTTNG_UST_TRACEPOINT_CREATE_PROBES
#include "flight-tp.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double seconds;
static double gap; /* a thread's seconds between events; 0: none */
static struct timespec start;

static uint64_t checksum(uint32_t thread, uint64_t seq, const char *text, size_t len)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; i < 4; i++) { h ^= (thread >> (8 * i)) & 0xff; h *= 0x100000001b3ull; }
    for (int i = 0; i < 8; i++) { h ^= (seq >> (8 * i)) & 0xff; h *= 0x100000001b3ull; }
    for (size_t i = 0; i < len; i++) { h ^= (unsigned char)text[i]; h *= 0x100000001b3ull; }
    return h;
}

static double since_start(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (now.tv_sec - start.tv_sec) + (now.tv_nsec - start.tv_nsec) / 1e9;
}

static void *worker(void *arg)
{
    uint32_t t = (uint32_t)(uintptr_t)arg;
    char buf[48];
    uint64_t seq = 0;
    for (;;) {
        size_t len = (seq * 7 + (uint64_t)t * 13) % 48;
        for (size_t i = 0; i < len; i++)
            buf[i] = 'a' + (seq + i + t) % 26;
        lttng_ust_tracepoint(flight, event, t, seq, buf, len, checksum(t, seq, buf, len));
        seq++;
        if (seq % 1024 == 0 && since_start() >= seconds)
            break;
        if (gap > 0 && seq % 256 == 0) {
            double ahead = seq * gap - since_start();
            if (ahead > 0) {
                struct timespec s = { (time_t)ahead, (long)((ahead - (time_t)ahead) * 1e9) };
                nanosleep(&s, NULL);
            }
        }
    }
    return (void *)(uintptr_t)seq;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: flight THREADS SECONDS RATE DELAY_MS\n");
        return 2;
    }
    int threads = atoi(argv[1]);
    seconds = atof(argv[2]);
    double rate = atof(argv[3]);
    gap = rate > 0 ? threads / rate : 0;
    long delay = atol(argv[4]);
    struct timespec d = { delay / 1000, (delay % 1000) * 1000000 };
    nanosleep(&d, NULL);
    clock_gettime(CLOCK_MONOTONIC, &start);
    pthread_t tid[64];
    for (int i = 0; i < threads && i < 64; i++)
        pthread_create(&tid[i], NULL, worker, (void *)(uintptr_t)i);
    uint64_t total = 0;
    for (int i = 0; i < threads && i < 64; i++) {
        void *n;
        pthread_join(tid[i], &n);
        total += (uint64_t)(uintptr_t)n;
    }
    fprintf(stderr, "flight: %llu events emitted\n", (unsigned long long)total);
    return 0;
}
