/*
 * mpi_tag_test: MPI point-to-point semantics that exercise UCP's tag matching, asserting
 * results (payloads, status fields, error classes), not only that calls return.
 * Run by test_mpi.sh with Open MPI's pml ucx and MPICH's ch4:ucx over tm_sm, 2 and 4 ranks
 * (built as mpi_tag_test and mpi_tag_test_mpich).
 *
 *   ping-pong      rank 0 <-> 1, 0 B .. 4 MiB, every byte checked both ways
 *   any-source     every rank sends to rank 0, received with MPI_ANY_SOURCE / MPI_ANY_TAG;
 *                  source, tag, count, payload and per-sender order checked
 *   probe          MPI_Probe + MPI_Get_count + MPI_Recv, MPI_Mprobe + MPI_Mrecv,
 *                  MPI_Iprobe on a tag that has no message
 *   cancel         MPI_Irecv, MPI_Cancel, MPI_Test_cancelled; the tag still works after
 *   truncate       MPI_ERRORS_RETURN; posted and unexpected, eager and rendezvous sizes:
 *                  error class MPI_ERR_TRUNCATE
 *   deep queue     DEEP_RECVS receives of 2 KiB with distinct tags posted first, matched
 *                  by sends in reverse order
 *   derived        vector, indexed and struct datatypes (pml ucx sends and receives them
 *                  through UCP generic datatypes), 64 B .. 2 MiB of data across every
 *                  eager and rendezvous threshold, receive posted first and unexpected;
 *                  the receive buffer is compared byte for byte, gaps included, with what
 *                  MPI_Unpack makes of the same data locally
 *
 * Rank 0 prints "mpi_tag_test: PASS (<ranks> ranks, <checks> checks)" or the failures.
 */
#include <mpi.h>

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { DEEP_RECVS = 4096, DEEP_SIZE = 2048 };

static int rank, nranks;
static long checks, failures;

static void expect(int ok, const char *what, long detail) {
    ++checks;
    if (!ok) {
        ++failures;
        printf("FAIL rank %d: %s (%ld)\n", rank, what, detail);
        fflush(stdout);
    }
}

static unsigned char pattern(unsigned seed, size_t offset) {
    return (unsigned char)(seed * 131u + offset * 7u + (offset >> 9));
}

static void fill(unsigned char *buf, size_t len, unsigned seed) {
    for (size_t i = 0; i < len; ++i) {
        buf[i] = pattern(seed, i);
    }
}

/* Index of the first wrong byte, or len. */
static size_t verify(const unsigned char *buf, size_t len, unsigned seed) {
    for (size_t i = 0; i < len; ++i) {
        if (buf[i] != pattern(seed, i)) {
            return i;
        }
    }
    return len;
}

static void test_ping_pong(void) {
    static const size_t sizes[] = {0, 8, 1000, 4096, 65536, 1 << 20, 4 << 20};
    unsigned char *buf = malloc(4 << 20);
    if (rank > 1) {
        free(buf);
        return;
    }
    for (unsigned s = 0; s < sizeof(sizes) / sizeof(sizes[0]); ++s) {
        const size_t len = sizes[s];
        for (unsigned iter = 0; iter < 3; ++iter) {
            const unsigned seed = s * 10 + iter;
            MPI_Status st;
            int count = -1;
            if (rank == 0) {
                fill(buf, len, seed);
                MPI_Send(buf, (int)len, MPI_BYTE, 1, 10 + (int)s, MPI_COMM_WORLD);
                memset(buf, 0, len);
                MPI_Recv(buf, (int)len, MPI_BYTE, 1, 10 + (int)s, MPI_COMM_WORLD, &st);
                MPI_Get_count(&st, MPI_BYTE, &count);
                expect(count == (int)len, "ping-pong: echoed count", count);
                expect(verify(buf, len, seed + 1) == len, "ping-pong: echoed payload", (long)len);
            } else {
                memset(buf, 0, len);
                MPI_Recv(buf, (int)len, MPI_BYTE, 0, 10 + (int)s, MPI_COMM_WORLD, &st);
                MPI_Get_count(&st, MPI_BYTE, &count);
                expect(count == (int)len, "ping-pong: count", count);
                expect(verify(buf, len, seed) == len, "ping-pong: payload", (long)len);
                fill(buf, len, seed + 1);
                MPI_Send(buf, (int)len, MPI_BYTE, 0, 10 + (int)s, MPI_COMM_WORLD);
            }
        }
    }
    free(buf);
}

/* Message k of rank r: tag 1000 + 10 r + k, (r * 700 + k * 3000) bytes (eager and, for
 * k == 3, rendezvous sizes). */
enum { ANY_PER_RANK = 4 };
static int any_tag(int r, int k) { return 1000 + 10 * r + k; }
static size_t any_len(int r, int k) { return k == 3 ? (size_t)(300000 + r) : (size_t)(r * 700 + k * 3000); }

static void test_any_source(void) {
    if (rank != 0) {
        unsigned char *buf = malloc(400000);
        for (int k = 0; k < ANY_PER_RANK; ++k) {
            fill(buf, any_len(rank, k), (unsigned)any_tag(rank, k));
            MPI_Send(buf, (int)any_len(rank, k), MPI_BYTE, 0, any_tag(rank, k), MPI_COMM_WORLD);
        }
        free(buf);
        return;
    }
    unsigned char *buf = malloc(400000);
    int next[64] = {0};
    for (int m = 0; m < (nranks - 1) * ANY_PER_RANK; ++m) {
        MPI_Status st;
        int count = -1;
        MPI_Recv(buf, 400000, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
        MPI_Get_count(&st, MPI_BYTE, &count);
        const int src = st.MPI_SOURCE;
        expect(src >= 1 && src < nranks && src < 64, "any-source: MPI_SOURCE", src);
        if (src < 1 || src >= nranks || src >= 64) {
            continue;
        }
        const int k = next[src]++;
        expect(st.MPI_TAG == any_tag(src, k), "any-source: MPI_TAG in sender order", st.MPI_TAG);
        expect(count == (int)any_len(src, k), "any-source: count", count);
        expect(verify(buf, (size_t)count, (unsigned)st.MPI_TAG) == (size_t)count,
               "any-source: payload", st.MPI_TAG);
    }
    for (int r = 1; r < nranks && r < 64; ++r) {
        expect(next[r] == ANY_PER_RANK, "any-source: every message of a rank", next[r]);
    }
    free(buf);
}

static void test_probe(void) {
    enum { SMALL = 3000, LARGE = 300000 };
    if (rank == 1) {
        unsigned char *buf = malloc(LARGE);
        fill(buf, SMALL, 7);
        MPI_Send(buf, SMALL, MPI_BYTE, 0, 7, MPI_COMM_WORLD);
        fill(buf, LARGE, 8);
        MPI_Send(buf, LARGE, MPI_BYTE, 0, 8, MPI_COMM_WORLD);
        free(buf);
    } else if (rank == 0) {
        MPI_Status st;
        int count = -1, flag = 1;
        MPI_Iprobe(1, 6, MPI_COMM_WORLD, &flag, &st);
        expect(flag == 0, "probe: MPI_Iprobe finds no message for an unused tag", flag);

        MPI_Probe(1, 7, MPI_COMM_WORLD, &st);
        MPI_Get_count(&st, MPI_BYTE, &count);
        expect(count == SMALL && st.MPI_TAG == 7 && st.MPI_SOURCE == 1, "probe: status", count);
        unsigned char *buf = malloc((size_t)count);
        MPI_Recv(buf, count, MPI_BYTE, 1, 7, MPI_COMM_WORLD, &st);
        expect(verify(buf, SMALL, 7) == SMALL, "probe: payload", 7);
        free(buf);

        MPI_Message msg;
        MPI_Mprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &msg, &st);
        MPI_Get_count(&st, MPI_BYTE, &count);
        expect(count == LARGE && st.MPI_TAG == 8 && st.MPI_SOURCE == 1, "mprobe: status", count);
        buf = malloc((size_t)count);
        MPI_Mrecv(buf, count, MPI_BYTE, &msg, &st);
        expect(msg == MPI_MESSAGE_NULL, "mrecv: message handle consumed", 0);
        expect(verify(buf, LARGE, 8) == LARGE, "mprobe: payload", 8);
        free(buf);
    }
}

static void test_cancel(void) {
    enum { LEN = 4096 };
    unsigned char buf[LEN];
    if (rank == 0) {
        MPI_Request req;
        MPI_Status st;
        int cancelled = 0;
        memset(buf, 0, LEN);
        MPI_Irecv(buf, LEN, MPI_BYTE, 1, 999, MPI_COMM_WORLD, &req);
        MPI_Cancel(&req);
        MPI_Wait(&req, &st);
        MPI_Test_cancelled(&st, &cancelled);
        expect(cancelled, "cancel: MPI_Test_cancelled", cancelled);
        expect(buf[0] == 0 && buf[LEN - 1] == 0, "cancel: buffer untouched", buf[0]);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    /* The cancelled receive must not swallow a later message with the same tag. */
    if (rank == 1) {
        fill(buf, LEN, 99);
        MPI_Send(buf, LEN, MPI_BYTE, 0, 999, MPI_COMM_WORLD);
    } else if (rank == 0) {
        MPI_Status st;
        MPI_Recv(buf, LEN, MPI_BYTE, 1, 999, MPI_COMM_WORLD, &st);
        expect(verify(buf, LEN, 99) == LEN, "cancel: later message on the same tag", 99);
    }
}

static void test_truncate(void) {
    static const struct {
        int send, recv, posted;
    } cases[] = {
        {8192, 4096, 1}, {1 << 20, 65536, 1}, {8192, 4096, 0}, {1 << 20, 65536, 0}};
    unsigned char *buf = malloc((1 << 20) + 64);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    for (int c = 0; c < 4; ++c) {
        const int tag = 50 + c;
        if (rank == 0) {
            MPI_Request req;
            MPI_Status st;
            memset(buf, 0xe7, (size_t)cases[c].recv + 64);
            if (cases[c].posted) {
                MPI_Irecv(buf, cases[c].recv, MPI_BYTE, 1, tag, MPI_COMM_WORLD, &req);
                MPI_Barrier(MPI_COMM_WORLD);
            } else {
                MPI_Barrier(MPI_COMM_WORLD);
                MPI_Probe(1, tag, MPI_COMM_WORLD, &st); /* the message waits unexpected */
                MPI_Irecv(buf, cases[c].recv, MPI_BYTE, 1, tag, MPI_COMM_WORLD, &req);
            }
            int rc = MPI_Wait(&req, &st);
            int cls = MPI_SUCCESS;
            MPI_Error_class(rc == MPI_SUCCESS ? st.MPI_ERROR : rc, &cls);
            expect(rc != MPI_SUCCESS, "truncate: MPI_Wait reports an error", cases[c].send);
            expect(cls == MPI_ERR_TRUNCATE, "truncate: error class MPI_ERR_TRUNCATE", cls);
            int guard_ok = 1;
            for (int i = 0; i < 64; ++i) {
                guard_ok = guard_ok && buf[cases[c].recv + i] == 0xe7;
            }
            expect(guard_ok, "truncate: nothing written past the buffer", cases[c].send);
        } else if (rank == 1) {
            fill(buf, (size_t)cases[c].send, (unsigned)tag);
            MPI_Barrier(MPI_COMM_WORLD);
            int rc = MPI_Send(buf, cases[c].send, MPI_BYTE, 0, tag, MPI_COMM_WORLD);
            expect(rc == MPI_SUCCESS, "truncate: the send itself succeeds", rc);
        } else {
            MPI_Barrier(MPI_COMM_WORLD);
        }
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    free(buf);
    /* Traffic goes on normally after truncations. */
    test_ping_pong();
}

static void test_deep_queue(void) {
    if (rank > 1) {
        MPI_Barrier(MPI_COMM_WORLD);
        return;
    }
    unsigned char *bufs = malloc((size_t)DEEP_RECVS * DEEP_SIZE);
    if (rank == 0) {
        MPI_Request *reqs = malloc(sizeof(MPI_Request) * DEEP_RECVS);
        MPI_Status *sts = malloc(sizeof(MPI_Status) * DEEP_RECVS);
        memset(bufs, 0, (size_t)DEEP_RECVS * DEEP_SIZE);
        for (int t = 0; t < DEEP_RECVS; ++t) {
            MPI_Irecv(bufs + (size_t)t * DEEP_SIZE, DEEP_SIZE, MPI_BYTE, 1, 20000 + t,
                      MPI_COMM_WORLD, &reqs[t]);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Waitall(DEEP_RECVS, reqs, sts);
        long bad = 0;
        for (int t = 0; t < DEEP_RECVS; ++t) {
            int count = -1;
            MPI_Get_count(&sts[t], MPI_BYTE, &count);
            if (sts[t].MPI_TAG != 20000 + t || count != DEEP_SIZE ||
                verify(bufs + (size_t)t * DEEP_SIZE, DEEP_SIZE, (unsigned)t) != DEEP_SIZE) {
                ++bad;
            }
        }
        expect(bad == 0, "deep queue: receives with a wrong tag, count or payload", bad);
        free(reqs);
        free(sts);
    } else {
        MPI_Barrier(MPI_COMM_WORLD);
        for (int t = DEEP_RECVS - 1; t >= 0; --t) {
            fill(bufs, DEEP_SIZE, (unsigned)t);
            MPI_Send(bufs, DEEP_SIZE, MPI_BYTE, 0, 20000 + t, MPI_COMM_WORLD);
        }
    }
    free(bufs);
}

/* A derived datatype and how many of it make about `bytes` bytes of data. */
struct derived {
    const char  *name;
    MPI_Datatype type;
};

struct padded {
    int    a;
    double b[3];
    char   c[5];
};

static void make_derived(struct derived out[3]) {
    /* vector: 16 ints every 24 */
    MPI_Type_vector(64, 16, 24, MPI_INT, &out[0].type);
    out[0].name = "vector";
    /* indexed: blocks of 1..7 doubles, gaps of 0..2 between */
    int blocklens[40], displs[40], at = 0;
    for (int i = 0; i < 40; ++i) {
        blocklens[i] = 1 + i % 7;
        displs[i]    = at;
        at += blocklens[i] + i % 3;
    }
    MPI_Type_indexed(40, blocklens, displs, MPI_DOUBLE, &out[1].type);
    out[1].name = "indexed";
    /* struct: int, 3 doubles, 5 chars, with the compiler's padding as gaps */
    int          lens[3]  = {1, 3, 5};
    MPI_Aint     offs[3]  = {offsetof(struct padded, a), offsetof(struct padded, b),
                             offsetof(struct padded, c)};
    MPI_Datatype types[3] = {MPI_INT, MPI_DOUBLE, MPI_CHAR};
    MPI_Datatype raw;
    MPI_Type_create_struct(3, lens, offs, types, &raw);
    MPI_Type_create_resized(raw, 0, sizeof(struct padded), &out[2].type);
    MPI_Type_free(&raw);
    out[2].name = "struct";
    for (int i = 0; i < 3; ++i) {
        MPI_Type_commit(&out[i].type);
    }
}

static void test_derived(void) {
    static const size_t targets[] = {64, 1024, 8192, 65536, 300000, 2 << 20};
    struct derived      dts[3];
    make_derived(dts);
    for (int d = 0; d < 3; ++d) {
        int      size;
        MPI_Aint lb, extent;
        MPI_Type_size(dts[d].type, &size);
        MPI_Type_get_extent(dts[d].type, &lb, &extent);
        for (unsigned t = 0; t < sizeof(targets) / sizeof(targets[0]); ++t) {
            const int    count = (int)((targets[t] + (size_t)size - 1) / (size_t)size);
            const size_t span  = (size_t)extent * (size_t)count;
            for (int unexpected = 0; unexpected < 2; ++unexpected) {
                const unsigned seed = 7000 + d * 100 + t * 2 + unexpected;
                const int      tag  = 5000 + (int)seed;
                unsigned char *buf  = malloc(span);
                if (rank == 0) {
                    MPI_Request req;
                    fill(buf, span, seed); /* the gaps too: they must not travel */
                    if (!unexpected) {
                        MPI_Barrier(MPI_COMM_WORLD);
                    }
                    MPI_Isend(buf, count, dts[d].type, 1, tag, MPI_COMM_WORLD, &req);
                    if (unexpected) {
                        MPI_Barrier(MPI_COMM_WORLD);
                    }
                    MPI_Wait(&req, MPI_STATUS_IGNORE);
                } else if (rank == 1) {
                    /* what the receive must leave: the data where the type puts it,
                     * 0xee elsewhere (MPI's own pack and unpack, no transport) */
                    unsigned char *want   = malloc(span);
                    unsigned char *source = malloc(span);
                    int            packed = 0, pos = 0, max_packed = 0;
                    MPI_Pack_size(count, dts[d].type, MPI_COMM_WORLD, &max_packed);
                    unsigned char *stream = malloc((size_t)max_packed);
                    fill(source, span, seed);
                    MPI_Pack(source, count, dts[d].type, stream, max_packed, &packed,
                             MPI_COMM_WORLD);
                    memset(want, 0xee, span);
                    MPI_Unpack(stream, packed, &pos, want, count, dts[d].type, MPI_COMM_WORLD);
                    memset(buf, 0xee, span);
                    MPI_Request req;
                    MPI_Status  st;
                    int         got = -1;
                    if (!unexpected) {
                        MPI_Irecv(buf, count, dts[d].type, 0, tag, MPI_COMM_WORLD, &req);
                        MPI_Barrier(MPI_COMM_WORLD);
                    } else {
                        MPI_Barrier(MPI_COMM_WORLD);
                        MPI_Irecv(buf, count, dts[d].type, 0, tag, MPI_COMM_WORLD, &req);
                    }
                    MPI_Wait(&req, &st);
                    MPI_Get_count(&st, dts[d].type, &got);
                    expect(got == count, dts[d].name, (long)targets[t]);
                    size_t bad = span;
                    for (size_t i = 0; i < span; ++i) {
                        if (buf[i] != want[i]) {
                            bad = i;
                            break;
                        }
                    }
                    if (bad != span) {
                        printf("derived %s, %zu B of data, %s: byte %zu of %zu differs\n",
                               dts[d].name, targets[t], unexpected ? "unexpected" : "posted",
                               bad, span);
                    }
                    expect(bad == span, "derived: received layout", (long)targets[t]);
                    free(stream);
                    free(source);
                    free(want);
                } else {
                    MPI_Barrier(MPI_COMM_WORLD);
                }
                free(buf);
            }
        }
    }
    for (int d = 0; d < 3; ++d) {
        MPI_Type_free(&dts[d].type);
    }
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (nranks < 2) {
        if (rank == 0) {
            printf("mpi_tag_test: needs at least 2 ranks\n");
        }
        MPI_Finalize();
        return 1;
    }
    /* An unexpected message of at least UCX_TM_THRESH first: it activates UCP's tag offload,
     * so the following receives are posted to the transport. */
    test_any_source();
    MPI_Barrier(MPI_COMM_WORLD);
    test_ping_pong();
    MPI_Barrier(MPI_COMM_WORLD);
    test_probe();
    MPI_Barrier(MPI_COMM_WORLD);
    test_cancel();
    MPI_Barrier(MPI_COMM_WORLD);
    test_truncate();
    MPI_Barrier(MPI_COMM_WORLD);
    test_deep_queue();
    MPI_Barrier(MPI_COMM_WORLD);
    test_derived();

    long totals[2] = {checks, failures}, sums[2] = {0, 0};
    MPI_Reduce(totals, sums, 2, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("mpi_tag_test: %s (%d ranks, %ld checks, %ld failures)\n",
               sums[1] == 0 ? "PASS" : "FAIL", nranks, sums[0], sums[1]);
    }
    MPI_Finalize();
    return sums[1] == 0 || rank != 0 ? 0 : 1;
}
