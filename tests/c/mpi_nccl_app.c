/* A small MPI+NCCL application, built against nccl-sim's CPU-only libnccl by
 * tests/libnccl.rs and run under mpirun: an allreduce loop, an allgather, a communicator
 * split by parity with an allreduce on it, and a send/recv ring in a group. Every rank
 * checks the results and prints one line saying what it got. nccl-sim's scenario
 * `mpi-app` makes the same NCCL calls. */
#include <mpi.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>

enum {
  ITERATIONS = 5,
  REDUCE_COUNT = 16384,
  GATHER_COUNT = 256,
  HALF_COUNT = 1024,
  RING_COUNT = 4096
};

static int world_rank = -1;

#define CHECK_NCCL(call)                                                          \
  do {                                                                            \
    ncclResult_t result_ = (call);                                                \
    if (result_ != ncclSuccess) {                                                 \
      fprintf(stderr, "rank %d: %s failed: %s\n", world_rank, #call,              \
              ncclGetErrorString(result_));                                       \
      MPI_Abort(MPI_COMM_WORLD, 1);                                               \
    }                                                                             \
  } while (0)

static void *allocate(size_t bytes) {
  void *buffer = malloc(bytes);
  if (buffer == NULL) {
    fprintf(stderr, "rank %d: out of memory\n", world_rank);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  return buffer;
}

int main(int argc, char **argv) {
  int size, errors = 0, version = 0;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  CHECK_NCCL(ncclGetVersion(&version));

  ncclUniqueId id;
  if (world_rank == 0) CHECK_NCCL(ncclGetUniqueId(&id));
  MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
  ncclComm_t world;
  CHECK_NCCL(ncclCommInitRank(&world, size, id, world_rank));
  cudaStream_t stream = NULL; /* never used by a CPU-only NCCL */

  /* The allreduce loop: element j of rank r is r + 1 + j % 7 + iteration. */
  float *reduce_in = allocate(REDUCE_COUNT * sizeof(float));
  float *reduce_out = allocate(REDUCE_COUNT * sizeof(float));
  for (int iteration = 0; iteration < ITERATIONS; iteration++) {
    for (int j = 0; j < REDUCE_COUNT; j++) reduce_in[j] = world_rank + 1 + j % 7 + iteration;
    CHECK_NCCL(ncclAllReduce(reduce_in, reduce_out, REDUCE_COUNT, ncclFloat, ncclSum, world,
                             stream));
    for (int j = 0; j < REDUCE_COUNT; j++) {
      float want = size * (size + 1) / 2 + size * (j % 7 + iteration);
      if (reduce_out[j] != want) errors++;
    }
  }

  /* The allgather: rank r contributes r * 1000 + j. */
  int *gather_in = allocate(GATHER_COUNT * sizeof(int));
  int *gather_out = allocate((size_t)size * GATHER_COUNT * sizeof(int));
  for (int j = 0; j < GATHER_COUNT; j++) gather_in[j] = world_rank * 1000 + j;
  CHECK_NCCL(ncclAllGather(gather_in, gather_out, GATHER_COUNT, ncclInt32, world, stream));
  for (int r = 0; r < size; r++)
    for (int j = 0; j < GATHER_COUNT; j++)
      if (gather_out[r * GATHER_COUNT + j] != r * 1000 + j) errors++;

  /* Split by parity; each half sums its members' world ranks. */
  ncclComm_t half;
  int color = world_rank % 2, half_rank, half_size;
  CHECK_NCCL(ncclCommSplit(world, color, world_rank, &half, NULL));
  CHECK_NCCL(ncclCommUserRank(half, &half_rank));
  CHECK_NCCL(ncclCommCount(half, &half_size));
  int *half_in = allocate(HALF_COUNT * sizeof(int));
  int *half_out = allocate(HALF_COUNT * sizeof(int));
  for (int j = 0; j < HALF_COUNT; j++) half_in[j] = world_rank;
  CHECK_NCCL(ncclAllReduce(half_in, half_out, HALF_COUNT, ncclInt32, ncclSum, half, stream));
  int half_sum = 0;
  for (int r = color; r < size; r += 2) half_sum += r;
  for (int j = 0; j < HALF_COUNT; j++)
    if (half_out[j] != half_sum) errors++;
  if (half_rank != world_rank / 2 || half_size != (size + 1 - color) / 2) errors++;

  /* The ring: send to the next rank, receive from the previous one, in one group. */
  int next = (world_rank + 1) % size, previous = (world_rank + size - 1) % size;
  float *ring_out = allocate(RING_COUNT * sizeof(float));
  float *ring_in = allocate(RING_COUNT * sizeof(float));
  for (int j = 0; j < RING_COUNT; j++) ring_out[j] = world_rank * 10 + j % 5;
  CHECK_NCCL(ncclGroupStart());
  CHECK_NCCL(ncclSend(ring_out, RING_COUNT, ncclFloat, next, world, stream));
  CHECK_NCCL(ncclRecv(ring_in, RING_COUNT, ncclFloat, previous, world, stream));
  CHECK_NCCL(ncclGroupEnd());
  for (int j = 0; j < RING_COUNT; j++)
    if (ring_in[j] != previous * 10 + j % 5) errors++;

  CHECK_NCCL(ncclCommDestroy(half));
  CHECK_NCCL(ncclCommDestroy(world));

  if (errors == 0)
    printf("rank %d of %d (NCCL %d): allreduce x%d ok, allgather ok, split color %d rank %d "
           "of %d sum %d ok, ring from %d ok\n",
           world_rank, size, version, ITERATIONS, color, half_rank, half_size, half_sum,
           previous);
  else
    printf("rank %d of %d: %d wrong results\n", world_rank, size, errors);
  free(reduce_in); free(reduce_out); free(gather_in); free(gather_out);
  free(half_in); free(half_out); free(ring_out); free(ring_in);
  MPI_Finalize();
  return errors == 0 ? 0 : 1;
}
