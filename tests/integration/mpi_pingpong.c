/*
 * mpi_pingpong: one-way latency of an MPI ping-pong between ranks 0 and 1 (a benchmark for
 * contrib/bench_ucp.sh, not a test). Prints "mpi_pingpong <size> B: <median one-way us>
 * (<batches> batches of <iters>)", the median over batches of the mean per round trip / 2.
 * Usage: mpirun -np 2 ... mpi_pingpong [size] [iters] [batches]
 */
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>

static int compare(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const int size = argc > 1 ? atoi(argv[1]) : 8;
    const int iters = argc > 2 ? atoi(argv[2]) : 10000;
    const int batches = argc > 3 ? atoi(argv[3]) : 11;
    char *buf = calloc((size_t)(size > 0 ? size : 1), 1);
    double *oneway = malloc(sizeof(double) * (size_t)batches);
    for (int b = -1; b < batches; ++b) { /* batch -1: warm-up */
        MPI_Barrier(MPI_COMM_WORLD);
        const double start = MPI_Wtime();
        for (int i = 0; i < iters; ++i) {
            if (rank == 0) {
                MPI_Send(buf, size, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
                MPI_Recv(buf, size, MPI_BYTE, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else if (rank == 1) {
                MPI_Recv(buf, size, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(buf, size, MPI_BYTE, 0, 1, MPI_COMM_WORLD);
            }
        }
        if (b >= 0) {
            oneway[b] = (MPI_Wtime() - start) * 1e6 / iters / 2;
        }
    }
    if (rank == 0) {
        qsort(oneway, (size_t)batches, sizeof(double), compare);
        printf("mpi_pingpong %d B: %.3f us (%d batches of %d)\n", size, oneway[batches / 2],
               batches, iters);
    }
    free(oneway);
    free(buf);
    MPI_Finalize();
    return 0;
}
