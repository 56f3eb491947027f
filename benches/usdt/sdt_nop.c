/* A plain SDT probe in C (sys/sdt.h), fired N times in a loop: the
   baseline of what a USDT probe costs when a tool is attached (a uprobe
   trap per hit) and when none is (a nop). scripts/usdt-cost.sh runs it. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/sdt.h>
#include <time.h>

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 1000000;
    const char *path = "/items/42";
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < n; i++) {
        DTRACE_PROBE4(cdemo, request, i, path, 9, 0);
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    double ns = (b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec);
    fprintf(stderr, "sdt_nop: %ld events, %.1f ns/event\n", n, ns / n);
    return 0;
}
