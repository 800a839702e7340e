/* librocast_mpi: MPI_Bcast as rocast in-network multicast, for unmodified MPI programs.
 *
 * A PMPI library (MPI-3.1 §14.2, the profiling interface): preloaded
 * (LD_PRELOAD=librocast_mpi.so) or linked before libmpi, it defines MPI_Bcast and
 * MPI_Finalize and calls the MPI library's own through PMPI_*. A broadcast of at least
 * ROCAST_MPI_THRESHOLD bytes (default 256 KiB, docs/runtime/mpi.md) of a contiguous type travels as a rocast
 * group: the root is the group's leader, every other rank a member, and the switch
 * (`rocast switch`, Cepheus §III) replicates the root's RoCE packets and aggregates the
 * members' ACKs. Everything else goes to PMPI_Bcast unchanged: small messages,
 * non-contiguous types, and every broadcast of a (communicator, root) pair for which
 * rocast could not set up a group (no switch answered, a rank already holds a group,
 * ROCAST_MPI_DISABLE set).
 *
 * The group of a (communicator, root) pair is made on its first large broadcast and
 * kept with the communicator (MPI attribute caching), so later broadcasts reuse it; it
 * is freed when the communicator is (MPI_Comm_free, or MPI_Finalize for
 * MPI_COMM_WORLD). Setting up: the root asks the switch for a group address and
 * broadcasts it with its own address (PMPI_Bcast), the members join while the root
 * waits for them, and all agree with PMPI_Allreduce whether every rank got there; if
 * not, the pair stays on PMPI_Bcast for good (the same decision at every rank).
 *
 * One group per process at a time: a group's data uses the rank's address on UDP
 * 4791, which one socket holds. A second pair (another root, another communicator)
 * uses PMPI_Bcast, decided collectively, so ranks never disagree.
 *
 * Failure: a broadcast that rocast could not complete at every rank (a member lost
 * mid-transfer, a corrupted buffer, a timeout: ROCAST_MPI_TIMEOUT_MS) returns
 * MPI_ERR_OTHER through the communicator's error handler at every rank (the ranks
 * agree on the outcome with one PMPI_Allreduce of an int); with the default
 * MPI_ERRORS_ARE_FATAL that aborts the job rather than hanging it.
 *
 * The protocol work is Rust (crates/mpi, over rocast_net::mcast and the core's group
 * session); this file is MPI only.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* crates/mpi's C ABI. */
typedef struct rocast_mpi_group rocast_mpi_group;
int rocast_mpi_local_address(uint8_t out[4], char *err, size_t err_len);
int rocast_mpi_allocate(const uint8_t local[4], uint8_t mcst_out[4], char *err, size_t err_len);
rocast_mpi_group *rocast_mpi_lead(const uint8_t local[4], const uint8_t mcst[4], uint32_t members,
                                  uint64_t capacity, char *err, size_t err_len);
rocast_mpi_group *rocast_mpi_join(const uint8_t local[4], const uint8_t leader[4],
                                  const uint8_t mcst[4], char *err, size_t err_len);
int rocast_mpi_through_switch(const rocast_mpi_group *g);
int rocast_mpi_send(rocast_mpi_group *g, const void *buf, size_t len, char *err, size_t err_len);
int rocast_mpi_recv(rocast_mpi_group *g, void *buf, size_t len, char *err, size_t err_len);
void rocast_mpi_close(rocast_mpi_group *g, int ok);

#define ERR_LEN 256

/* What a communicator holds for one root (an attribute per communicator: a list). */
struct root_group {
  int root;
  int use_rocast; /* 1: the group below carries this root's large broadcasts */
  rocast_mpi_group *group;
  int ok; /* every broadcast so far succeeded */
  char setup_error[ERR_LEN]; /* why this rank has no group though the pair uses rocast */
  struct root_group *next;
};

/* The attribute's value: set once per communicator (setting it again would call the
 * delete callback on the old value), entries added to its list. */
struct comm_groups {
  struct root_group *first;
};

static int keyval = MPI_KEYVAL_INVALID;
/* The one group this process holds (see the header). */
static int holding = 0;
static long long counters[4]; /* rocast broadcasts, fallback broadcasts, failures, bytes */

static unsigned long long env_ull(const char *name, unsigned long long dflt) {
  const char *v = getenv(name);
  if (!v || !*v) return dflt;
  char *end;
  unsigned long long x = strtoull(v, &end, 10);
  return *end ? dflt : x;
}

/* The settings this file reads, from the environment once (the same at every rank:
 * mpirun -x). The threshold: from 256 KiB the library was at least as fast as Open MPI's
 * own decision at 4 and 8 ranks, and below it slower at every size (docs/runtime/mpi.md). */
static struct {
  int read;
  unsigned long long threshold, capacity;
  int verbose;
} settings;

static void read_settings(void) {
  if (settings.read) return;
  settings.threshold = env_ull("ROCAST_MPI_THRESHOLD", 256 * 1024);
  settings.capacity = env_ull("ROCAST_MPI_CAPACITY", 64ull << 20);
  settings.verbose = env_ull("ROCAST_MPI_VERBOSE", 0) != 0;
  settings.read = 1;
}

static int verbose(void) {
  read_settings();
  return settings.verbose;
}

static void free_list(struct root_group *r) {
  while (r) {
    struct root_group *n = r->next;
    if (r->group) {
      rocast_mpi_close(r->group, r->ok);
      holding = 0;
    }
    free(r);
    r = n;
  }
}

/* The attribute's delete callback: the communicator is freed (collective), so every
 * rank closes its side of each group, the root telling the members. */
static int delete_attr(MPI_Comm comm, int key, void *value, void *extra) {
  (void)comm, (void)key, (void)extra;
  struct comm_groups *c = value;
  free_list(c->first);
  free(c);
  return MPI_SUCCESS;
}

/* The communicator's list (made and attached on first use), NULL if MPI refused. */
static struct comm_groups *groups_of(MPI_Comm comm) {
  void *v = NULL;
  int found = 0;
  if (keyval == MPI_KEYVAL_INVALID &&
      PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_attr, &keyval, NULL) != MPI_SUCCESS)
    return NULL;
  PMPI_Comm_get_attr(comm, keyval, &v, &found);
  if (found) return v;
  struct comm_groups *c = calloc(1, sizeof *c);
  if (c && PMPI_Comm_set_attr(comm, keyval, c) != MPI_SUCCESS) {
    free(c);
    return NULL;
  }
  return c;
}

static struct root_group *lookup(struct comm_groups *c, int root) {
  for (struct root_group *r = c->first; r; r = r->next)
    if (r->root == root) return r;
  return NULL;
}

/* Sets up the group of (comm, root), collectively; records the decision. */
static struct root_group *setup(struct comm_groups *c, MPI_Comm comm, int root, int rank, int size) {
  struct root_group *r = calloc(1, sizeof *r);
  /* The other ranks are entering the collective set-up: a rank that cannot take part
   * must not fall back alone (they would wait for it). Out of memory ends the job. */
  if (!r) PMPI_Abort(comm, MPI_ERR_NO_MEM);
  r->root = root;
  r->ok = 1;
  char err[ERR_LEN] = "";
  /* Can this rank take a group? Then: the root's address and group address. */
  uint8_t local[4] = {0}, info[9] = {0}; /* leader[4] mcst[4] root_ok */
  int can = !holding && !getenv("ROCAST_MPI_DISABLE") &&
            rocast_mpi_local_address(local, err, sizeof err) == 0;
  int all = 0;
  PMPI_Allreduce(&can, &all, 1, MPI_INT, MPI_MIN, comm);
  if (all) {
    if (rank == root) {
      memcpy(info, local, 4);
      info[8] = rocast_mpi_allocate(local, info + 4, err, sizeof err) == 0;
    }
    PMPI_Bcast(info, 9, MPI_BYTE, root, comm);
    if (info[8]) {
      /* From here every rank takes the rocast branch for this pair. A member's join
       * returns once it has joined; it answers the registration in its first receive,
       * while the root waits here for the group to come up. A rank whose side failed
       * reports MPI_ERR_OTHER at each broadcast, and the others time out into the same:
       * the ranks never split between rocast and PMPI_Bcast. */
      r->use_rocast = 1;
      holding = 1;
      if (rank == root)
        r->group = rocast_mpi_lead(local, info + 4, (uint32_t)(size - 1), settings.capacity, err, sizeof err);
      else
        r->group = rocast_mpi_join(local, info, info + 4, err, sizeof err);
      if (!r->group) {
        r->ok = 0;
        snprintf(r->setup_error, sizeof r->setup_error, "group set-up failed: %s", err);
      }
    }
  }
  if (verbose() && rank == root)
    fprintf(stderr, "librocast_mpi: root %d: %s%s%s\n", root,
            !r->use_rocast                               ? "PMPI_Bcast"
            : !r->group                                  ? "rocast group failed"
            : rocast_mpi_through_switch(r->group) == 1   ? "rocast group through the switch"
                                                         : "rocast group on its fallback overlay",
            *err ? ": " : "", err);
  r->next = c->first;
  c->first = r;
  return r;
}

int MPI_Bcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm) {
  int size = 0, rank = 0, tsize = 0, inter = 0;
  PMPI_Comm_test_inter(comm, &inter);
  PMPI_Comm_size(comm, &size);
  PMPI_Type_size(datatype, &tsize);
  MPI_Aint lb = 0, extent = 0;
  PMPI_Type_get_extent(datatype, &lb, &extent);
  unsigned long long bytes = (unsigned long long)count * (unsigned long long)tsize;
  read_settings();
  unsigned long long threshold = settings.threshold, cap = settings.capacity;
  /* Contiguous types only (size == extent, no lower bound): the buffer is the bytes.
   * Every rank sees the same count x size (MPI requires matching type signatures), so
   * every rank takes the same branch. */
  if (inter || size < 2 || count <= 0 || bytes < threshold || bytes > cap || (MPI_Aint)tsize != extent ||
      lb != 0) {
    counters[1]++;
    return PMPI_Bcast(buffer, count, datatype, root, comm);
  }
  PMPI_Comm_rank(comm, &rank);
  /* Every rank gets the same answer here: the list changes only in collective setups. */
  struct comm_groups *c = groups_of(comm);
  /* As in setup: a rank whose attribute MPI refused cannot decide alone. */
  if (!c) PMPI_Abort(comm, MPI_ERR_INTERN);
  struct root_group *r = c ? lookup(c, root) : NULL;
  if (c && !r) r = setup(c, comm, root, rank, size);
  if (!r || !r->use_rocast) {
    counters[1]++;
    return PMPI_Bcast(buffer, count, datatype, root, comm);
  }
  char err[ERR_LEN] = "";
  if (!r->group) snprintf(err, sizeof err, "%s", r->setup_error);
  int rc = !r->group ? -1
           : rank == root ? rocast_mpi_send(r->group, buffer, (size_t)bytes, err, sizeof err)
                        : rocast_mpi_recv(r->group, buffer, (size_t)bytes, err, sizeof err);
  /* One outcome for all: a member the root lost, or one that lost its data path, fails
   * its broadcast, but the others got their bytes. Every rank learns whether any failed
   * (an 4-byte PMPI_Allreduce per broadcast, included in docs/runtime/mpi.md's times),
   * so all return MPI_ERR_OTHER or none does; a dead process ends the job in Open MPI's
   * runtime before this could hang. */
  int bad = rc != 0, any_bad = 0;
  if (rc != 0)
    fprintf(stderr, "librocast_mpi: rank %d: MPI_Bcast of %llu bytes from root %d failed: %s\n", rank,
            bytes, root, err);
  int arc = PMPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, comm);
  if (arc != MPI_SUCCESS || any_bad) {
    r->ok = 0;
    counters[2]++;
    if (!bad)
      fprintf(stderr, "librocast_mpi: rank %d: MPI_Bcast of %llu bytes from root %d failed at another rank\n",
              rank, bytes, root);
    PMPI_Comm_call_errhandler(comm, MPI_ERR_OTHER);
    return MPI_ERR_OTHER;
  }
  counters[0]++;
  counters[3] += (long long)bytes;
  return MPI_SUCCESS;
}

int MPI_Finalize(void) {
  /* MPI_COMM_WORLD's groups close here, the root telling its members, before the MPI
   * library goes away (MPI does not promise to delete its attributes at finalize). */
  if (keyval != MPI_KEYVAL_INVALID) PMPI_Comm_delete_attr(MPI_COMM_WORLD, keyval);
  if (verbose()) {
    int rank = 0;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    fprintf(stderr, "librocast_mpi: rank %d: %lld broadcasts by rocast (%lld bytes), %lld by PMPI_Bcast, %lld failed\n",
            rank, counters[0], counters[3], counters[1], counters[2]);
  }
  return PMPI_Finalize();
}
