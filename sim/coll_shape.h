/*
 * coll_shape.h — the shapes of NCCL's collective algorithms as pure
 * functions (no SimGrid), so that the engine can expand a COLL into
 * point-to-point steps and tests can check the shapes on their own:
 *
 *   tree   NCCL's double binary tree for allreduce: the members of a node
 *          form a chain whose first member stands for the node; the nodes
 *          form two binary trees in which a node that is inner in one is a
 *          leaf in the other (the second tree mirrors the first for an even
 *          node count, shifts it by one for an odd count). Each tree carries
 *          half of the buffer, reduced up to its root and broadcast back down,
 *          pipelined in chunks.
 *   ring   NCCL's ring (the engine expands it: 2(n-1) steps for allreduce).
 *   binomial  Open MPI libnbc's small-message allreduce: a binomial reduce to
 *          member 0 and a binomial broadcast back (a profile whose
 *          collectives.allreduce is open-mpi-libnbc).
 *   auto   the lower of the two modelled (alpha-beta) times, which is how NCCL
 *          chooses: NCCL src/graph/tuning.cc line ("No fixed size
 *          thresholds: the lowest modelled time picks the algorithm").
 *
 * The alpha-beta times here are also the simulator's analytic option.
 */
#ifndef BURSTSIM_SIM_COLL_SHAPE_H
#define BURSTSIM_SIM_COLL_SHAPE_H

#include <stdint.h>

/* A member has at most one chain child and two tree children. */
#define BS_TREE_MAX_CHILDREN 3

/* Pipeline chunk of the tree: NCCL's default channel buffer (NCCL_BUFFSIZE,
 * 4 MiB) over its 8 pipeline slots (NCCL_STEPS) is 512 KiB (derived). */
#define BS_TREE_CHUNK_BYTES (512 * 1024)
/* At most this many chunks per tree: bounds the events of huge buffers; the
 * pipeline-fill share of the time is then at most 2·depth / chunks. */
#define BS_TREE_MAX_CHUNKS 64

/* One member's place in one of the two trees: member indices (0..n-1). */
typedef struct {
  int parent; /* -1: the root */
  int nchild;
  int child[BS_TREE_MAX_CHILDREN];
} bs_tree_vertex;

/*
 * The vertex of member `me` in tree `t` (0 or 1) of a group of n members whose
 * nodes are node[0..n-1] (any ids; members of one node need not be adjacent;
 * nodes are numbered by first appearance, chains follow member order).
 * Returns 0, or -1 for bad arguments.
 */
int bs_dtree_vertex(int n, const int *node, int t, int me, bs_tree_vertex *v);

/* The parent of node index i (0..nn-1) in binary tree t of nn nodes, -1 for its root. */
int bs_dtree_node_parent(int nn, int t, int i);

/* The children of node index i in binary tree t (at most 2, into out); returns their count. */
int bs_dtree_node_children(int nn, int t, int i, int *out);

/* Hops from node index i up to the root of binary tree t (0 for the root). */
int bs_dtree_node_depth(int nn, int t, int i);

/* Chunks of one tree's half of `bytes` (>= 1), and the size of chunk c. */
int bs_tree_chunks(int64_t half);
int64_t bs_tree_chunk_size(int64_t half, int chunks, int c);

/* Link classes an alpha-beta time needs: latency (s) and bandwidth (B/s) of a
 * route inside a node and between nodes (inter unused when one node). */
typedef struct {
  double lat_intra, bw_intra, lat_inter, bw_inter;
} bs_coll_links;

/*
 * Alpha-beta time of a tree allreduce of `bytes` over the group (n members,
 * node ids as above): twice the deepest latency path (reduce up, broadcast
 * down), plus the busiest member's volume over its links (intra and inter
 * links in parallel), plus the pipeline fill of one chunk over every hop of
 * that path. Returns seconds.
 */
double bs_tree_allreduce_time(int n, const int *node, int64_t bytes, const bs_coll_links *l);

/*
 * Bytes every member sends in a tree allreduce of `bytes` (both trees, each
 * tree's half once to the parent and once to each child; a member receives as
 * much as it sends): sent[m], and inter[m], the share sent to other nodes.
 * O(n log n) for the whole group. Returns 0, or -1 (out of memory, bad args).
 */
int bs_tree_member_bytes(int n, const int *node, int64_t bytes, int64_t *sent, int64_t *inter);

/* Alpha-beta time of a ring of `steps` steps of `chunk` bytes over a route of (lat, bw). */
double bs_ring_time(int steps, int64_t chunk, double lat, double bw);

/*
 * Rail-aligned ring channels. On a rail-optimized fabric (one NIC per GPU,
 * NIC i of every node on rail i) NCCL runs several rings at once, each
 * leaving a node through a different NIC, so that a collective over whole
 * nodes keeps every NIC busy (github.com/NVIDIA/nccl/issues/812: multi-node DGX A100 allreduce
 * busbw about 192 GB/s = 8 HDR NICs). The shape used here, for a group of
 * nn >= 2 whole nodes of P members each (member me = node j * P + local i):
 * channel ch (0..P-1) enters an even node at local index ch and leaves it at
 * ch-1, and enters an odd node at ch-1 and leaves it at ch, so every hop
 * between nodes joins equal local indices (same rail). With nn odd, node 0
 * is entered at ch+1 and the last node left at ch+1 (P >= 3), or, with P = 2,
 * the hop back to node 0 changes rail. Inside a node the walk goes from the
 * entry upwards through the other indices to the exit (NVSwitch: any order
 * costs the same). Each member sends to one neighbour per channel, P-1 of
 * them inside its node and one through its own NIC.
 * Returns the member index of me's next (dir > 0) or previous (dir < 0)
 * member on channel ch, or -1 for bad arguments.
 */
int bs_ring_channel_peer(int P, int nn, int ch, int me, int dir);

/*
 * Open MPI 4.1's non-blocking allreduce (coll/libnbc, ompi/mca/coll/libnbc/nbc_iallreduce.c,
 * nbc_allreduce_init and allred_sched_diss; the runtime's MPI backend calls MPI_Iallreduce, which
 * the tuned component does not serve). Its default choice: the binomial algorithm below 4
 * ranks or below 65536 bytes (and for in-place or non-commutative calls, which a COLL op does
 * not say), else reduce-scatter + allgather. Returns 1 for the binomial one.
 */
int bs_nbc_allreduce_binomial(int n, int64_t bytes);

/* The binomial allreduce of n members (member 0 the root): ceil(log2 n) rounds of reduce, each
 * a whole buffer, then a binomial broadcast of the result. */
int bs_binomial_rounds(int n);
/* Reduce round r (1 .. rounds) of member me: 1 when me receives from *peer, -1 when it sends to
 * *peer (its last round: it leaves the reduce), 0 when it does nothing. */
int bs_binomial_reduce_step(int n, int me, int r, int *peer);
/* Broadcast: the member me receives the result from (-1 for the root), and the members it then
 * sends it to, all at once (into out, at most 31); returns their count. */
int bs_binomial_bcast_parent(int me);
int bs_binomial_bcast_children(int n, int me, int *out);

#endif
