/* A core's clock from a chain of dependent integer adds (bench/hw/clock.py compiles and runs it).
 *
 * Each add needs the previous one's result and takes one cycle on every x86 and Arm core, so a
 * chain of CHAIN adds run n times takes n x CHAIN cycles. The empty asm after each add tells
 * the compiler the register may have changed, so the adds cannot be folded into one multiply;
 * the addend is a register the compiler cannot know (argc), never an immediate some cores
 * eliminate at rename. The chain runs at n and at 2n iterations, best of reps each (noise only
 * slows a run): the difference of the two is n x CHAIN cycles with the fixed costs cancelled.
 * Time is the thread's own CPU time, so a run the scheduler set aside for another process (on a
 * busy machine) or the hypervisor's steal (where the guest accounts it) does not count.
 *
 *   add_chain N REPS  ->  "CHAIN N best_seconds_at_N best_seconds_at_2N checksum"
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define CHAIN 64
#define ADD x += y; __asm__ __volatile__("" : "+r"(x));
#define ADD8 ADD ADD ADD ADD ADD ADD ADD ADD

#ifdef CLOCK_THREAD_CPUTIME_ID
#define TIMER CLOCK_THREAD_CPUTIME_ID
#else
#define TIMER CLOCK_MONOTONIC
#endif

static double now(void) {
    struct timespec t;
    clock_gettime(TIMER, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static unsigned long chain(unsigned long n, unsigned long y) {
    unsigned long x = 0;
    for (unsigned long i = 0; i < n; i++) {
        ADD8 ADD8 ADD8 ADD8 ADD8 ADD8 ADD8 ADD8
    }
    return x;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: add_chain ITERATIONS REPS\n");
        return 2;
    }
    unsigned long n = strtoul(argv[1], NULL, 10), y = (unsigned long)argc - 2, sum = 0;
    int reps = atoi(argv[2]);
    double best[2] = {1e30, 1e30};
    for (int r = 0; r < reps; r++) {
        for (int k = 0; k < 2; k++) {
            double t0 = now();
            sum += chain(n << k, y);
            double dt = now() - t0;
            if (dt < best[k]) best[k] = dt;
        }
    }
    printf("%d %lu %.9f %.9f %lu\n", CHAIN, n, best[0], best[1], sum & 1);
    return 0;
}
