/*
 * MPI_THREAD_MULTIPLE: every rank runs kThreads threads that exchange
 * messages with the partner rank (rank ^ 1) at once, each thread on its
 * own tag, eager and rendezvous sizes alternating; every byte is checked.
 * Rank 0 prints "mpi_threads: PASS (N ranks, T threads)" or FAIL lines.
 * Needs an even number of ranks.
 */
#include <mpi.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

enum { kThreads = 4, kRounds = 200, kSmall = 16, kLarge = 32768 /* ints: 128 KiB */ };

static int g_rank;

static int value(int rank, int thread, int round, int j) {
    return rank * 1000003 + thread * 10007 + round * 31 + j;
}

/* One thread's exchanges; returns the number of wrong ints received. */
static void *exchange(void *arg) {
    const int thread = (int)(intptr_t)arg;
    const int peer   = g_rank ^ 1;
    int      *out    = malloc(sizeof(int) * kLarge);
    int      *in     = malloc(sizeof(int) * kLarge);
    long      wrong  = 0;
    for (int round = 0; round < kRounds; ++round) {
        const int   len = (round % 4 == 3) ? kLarge : kSmall;
        MPI_Request req[2];
        for (int j = 0; j < len; ++j) {
            out[j] = value(g_rank, thread, round, j);
        }
        MPI_Irecv(in, len, MPI_INT, peer, thread, MPI_COMM_WORLD, &req[0]);
        MPI_Isend(out, len, MPI_INT, peer, thread, MPI_COMM_WORLD, &req[1]);
        MPI_Waitall(2, req, MPI_STATUSES_IGNORE);
        for (int j = 0; j < len; ++j) {
            wrong += (in[j] != value(peer, thread, round, j));
        }
    }
    free(out);
    free(in);
    return (void *)(intptr_t)wrong;
}

int main(int argc, char **argv) {
    int provided = MPI_THREAD_SINGLE, size = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if ((provided < MPI_THREAD_MULTIPLE) || (size % 2 != 0)) {
        if (g_rank == 0) {
            printf("mpi_threads: FAIL: provided %d (MPI_THREAD_MULTIPLE is %d), %d ranks\n",
                   provided, MPI_THREAD_MULTIPLE, size);
        }
        MPI_Finalize();
        return 1;
    }
    pthread_t threads[kThreads];
    for (int t = 0; t < kThreads; ++t) {
        pthread_create(&threads[t], NULL, exchange, (void *)(intptr_t)t);
    }
    long wrong = 0;
    for (int t = 0; t < kThreads; ++t) {
        void *ret;
        pthread_join(threads[t], &ret);
        wrong += (long)(intptr_t)ret;
    }
    long total = 0;
    MPI_Reduce(&wrong, &total, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (g_rank == 0) {
        if (total == 0) {
            printf("mpi_threads: PASS (%d ranks, %d threads)\n", size, kThreads);
        } else {
            printf("mpi_threads: FAIL: %ld ints received wrong\n", total);
        }
    }
    MPI_Finalize();
    return (total == 0) ? 0 : 1;
}
