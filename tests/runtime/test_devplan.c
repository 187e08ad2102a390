/*
 * test_devplan.c — the host-side decisions of a GPU run (runtime/devplan.h),
 * tested without a GPU: the backend / communicator pairs, the device of each
 * rank, the group communicators and their set-up order (replayed as blocking
 * collective creations: every rank must get through), the stream and event
 * schedule of whole plans (replayed with the buffer hazards it must order:
 * no kernel touches a buffer a transfer still moves, no transfer reads or
 * overwrites a buffer before the kernels that touch it are done) and the
 * time accounting of the compute stream's marks against hand sums.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "tests/run_named.h"
#include "tests/toy_model.h"
#include "plans/workload.h"
#include "runtime/devplan.h"

static void base_config(bs_config *c, bs_method m, int G) {
  bs_config_default(c);
  c->model.heads = 8;
  c->model.kv_heads = 8;
  c->model.head_dim = 32;
  c->model.hidden = 8 * 32;
  c->model.dtype = BS_FP32;
  c->work.seq_len = 64 * G;
  c->work.phase = BS_TRAIN;
  c->work.causal = 1;
  c->par.method = m;
  c->par.gpus = G;
  c->par.ranks_per_node = G;
  c->par.double_ring = BS_OFF;
  c->par.ulysses_degree = 1;
}

static bs_plan *make_plan(const bs_config *c) {
  bs_plan *p = NULL;
  char err[512] = "";
  if (bs_plan_create(c, c->par.ranks_per_node, &p, err, sizeof err)) fail_msg("plan: %s", err);
  return p;
}

static void test_pairs(void **state) {
  (void)state;
  char err[256] = "";
  assert_int_equal(bs_dev_check_pair(BS_BACKEND_CPU, BS_XPORT_MPI, err, sizeof err), 0);
  assert_int_equal(bs_dev_check_pair(BS_BACKEND_CUDA, BS_XPORT_MPI, err, sizeof err), 0);
  assert_int_equal(bs_dev_check_pair(BS_BACKEND_CUDA, BS_XPORT_NCCL, err, sizeof err), 0);
  assert_int_equal(bs_dev_check_pair(BS_BACKEND_CPU, BS_XPORT_NCCL, err, sizeof err), -1);
  assert_non_null(strstr(err, "--comm nccl: needs --backend cuda"));
  assert_string_equal(bs_backend_kind_name(BS_BACKEND_CUDA), "cuda");
  assert_string_equal(bs_xport_kind_name(BS_XPORT_NCCL), "nccl");
  /* distinct from the project's 0 ok, 1 failed, 2 bad input, 3 watchdog, and from ctest's 77 */
  assert_true(BS_EXIT_NO_DEVICE > 3 && BS_EXIT_NO_DEVICE != 77);
}

static void test_pick(void **state) {
  (void)state;
  char err[256] = "";
  int dev;
  for (int r = 0; r < 8; r++) { /* eight visible devices: rank r of the node takes device r */
    assert_int_equal(bs_dev_pick(r, 8, &dev, err, sizeof err), 0);
    assert_int_equal(dev, r);
  }
  assert_int_equal(bs_dev_pick(3, 2, &dev, err, sizeof err), 0);
  assert_int_equal(dev, 1); /* round robin */
  assert_int_equal(bs_dev_pick(5, 1, &dev, err, sizeof err), 0);
  assert_int_equal(dev, 0); /* one visible device each (CUDA_VISIBLE_DEVICES per rank): its device 0 */
  assert_int_equal(bs_dev_pick(0, 0, &dev, err, sizeof err), -1);
  assert_non_null(strstr(err, "no CUDA device"));
  assert_int_equal(bs_dev_pick(-1, 2, &dev, err, sizeof err), -1);
}

static void test_sharing(void **state) {
  (void)state;
  char err[256] = "";
  /* four ranks of a node: 0 and 2 on one GPU, 1 and 3 each on their own (what MPI_Allgather gives) */
  char ids[4][32] = {"n0/0000:19:00.0", "n0/0000:3b:00.0", "n0/0000:19:00.0", "n0/0000:5d:00.0"};
  assert_int_equal(bs_dev_sharing(&ids[0][0], 32, 4, 0), 2);
  assert_int_equal(bs_dev_sharing(&ids[0][0], 32, 4, 2), 2);
  assert_int_equal(bs_dev_sharing(&ids[0][0], 32, 4, 1), 1);
  assert_int_equal(bs_dev_sharing(&ids[0][0], 32, 4, 3), 1);
  assert_int_equal(bs_dev_check_sharing(BS_XPORT_MPI, 2, ids[0], err, sizeof err), 0);
  assert_int_equal(bs_dev_check_sharing(BS_XPORT_NCCL, 1, ids[1], err, sizeof err), 0);
  assert_int_equal(bs_dev_check_sharing(BS_XPORT_NCCL, 2, ids[0], err, sizeof err), -1);
  assert_non_null(strstr(err, "2 ranks of this node on one GPU (n0/0000:19:00.0)"));
  assert_non_null(strstr(err, "NCCL allows one rank of a communicator per GPU"));
}

/* ---------------- groups ---------------- */

static int member(bs_group g, int r) {
  for (int i = 0; i < g.size; i++)
    if (g.first + i * g.stride == r) return i;
  return -1;
}

/* Every COLL group other than the world, gathered by brute force over every rank's program. */
static int plan_groups(const bs_plan *p, bs_group *gs, int cap) {
  int n = 0, G = bs_plan_ranks(p);
  for (int r = 0; r < G; r++) {
    bs_plan_iter *it = bs_plan_iter_new(p, r);
    bs_op op;
    while (bs_plan_next(it, &op)) {
      if (op.kind != BS_OP_COLL) continue;
      bs_group g = op.u.coll.group;
      if (g.first == 0 && g.stride == 1 && g.size == G) continue;
      int seen = 0;
      for (int i = 0; i < n; i++) seen |= !memcmp(&gs[i], &g, sizeof g);
      if (!seen && n < cap) gs[n++] = g;
    }
    bs_plan_iter_free(it);
  }
  return n;
}

/*
 * The set-up replayed: each rank creates its groups layer by layer (an MPI_Comm_split of the
 * world per layer, then the group's NCCL init, both blocking until every member is there).
 * Returns 1 when every rank gets through all of them.
 */
static int setup_completes(const bs_dev_groups *s, int G) {
  int *at = calloc((size_t)G, sizeof *at); /* the layer each rank is blocked in */
  int progress = 1, done = 0;
  while (progress && !done) {
    progress = 0;
    done = 1;
    for (int layer = 0; layer < s->nlayers; layer++) {
      /* the world split of this layer completes once every rank reached it */
      int all = 1;
      for (int r = 0; r < G; r++) all &= at[r] >= layer;
      if (!all) continue;
      for (int r = 0; r < G; r++)
        if (at[r] == layer) {
          at[r] = layer + 1;
          progress = 1;
        }
    }
    for (int r = 0; r < G; r++) done &= at[r] == s->nlayers;
  }
  free(at);
  return done;
}

static void check_groups(const bs_config *c, int want_groups) {
  bs_plan *p = make_plan(c);
  int G = bs_plan_ranks(p);
  bs_dev_groups s;
  char err[256] = "";
  assert_int_equal(bs_dev_groups_collect(p, &s, err, sizeof err), 0);
  bs_group brute[256];
  int nb = plan_groups(p, brute, 256);
  assert_int_equal(s.n, nb);
  if (want_groups >= 0) assert_int_equal(s.n, want_groups);
  for (int i = 0; i < nb; i++) { /* the same set */
    int found = 0;
    for (int j = 0; j < s.n; j++) found |= !memcmp(&s.groups[j].g, &brute[i], sizeof brute[i]);
    assert_true(found);
  }
  for (int i = 1; i < s.n; i++) { /* sorted by (stride, first, size) */
    bs_group a = s.groups[i - 1].g, b = s.groups[i].g;
    assert_true(a.stride < b.stride ||
                (a.stride == b.stride && (a.first < b.first || (a.first == b.first && a.size < b.size))));
  }
  for (int layer = 0; layer < s.nlayers; layer++)
    for (int r = 0; r < G; r++) {
      /* brute force: the groups of this layer holding r, in order */
      int holding = 0, colour = -1, key = -1, idx = 0;
      for (int i = 0; i < s.n; i++) {
        if (s.groups[i].layer != layer) continue;
        int pos = member(s.groups[i].g, r);
        if (pos >= 0) {
          holding++;
          colour = idx;
          key = pos;
        }
        idx++;
      }
      assert_true(holding <= 1); /* the groups of a layer are disjoint */
      int k = -7, col = bs_dev_group_colour(&s, layer, r, &k);
      assert_int_equal(col, colour);
      if (col >= 0) assert_int_equal(k, key);
    }
  assert_true(setup_completes(&s, G));
  bs_dev_groups_free(&s);
  bs_plan_free(p);
}

static void test_groups(void **state) {
  (void)state;
  bs_config c;
  base_config(&c, BS_BURST, 4); /* a ring: point-to-point only, no group */
  check_groups(&c, 0);
  base_config(&c, BS_USP, 4); /* all-to-all groups {0,1} and {2,3}: one layer */
  c.par.ulysses_degree = 2;
  check_groups(&c, 2);
  c.par.ulysses_placement = BS_RING_FIRST; /* groups {0,2} and {1,3} */
  check_groups(&c, 2);
  base_config(&c, BS_USP, 8);
  c.par.ulysses_degree = 4;
  check_groups(&c, 2);
  base_config(&c, BS_ULYSSES, 4); /* the world group only: none to make */
  check_groups(&c, 0);
  /* composed tp 2 x cp 2 x dp 2 at model scope: tp groups of 2 and dp x cp groups of 4 overlap */
  base_config(&c, BS_BURST, 8);
  toy_model(&c);
  c.work.scope = BS_SCOPE_MODEL;
  c.work.batch = 2;
  c.par.tp = 2;
  c.par.dp = 2;
  c.par.zero = 1;
  bs_plan *p = make_plan(&c);
  bs_dev_groups s;
  char err[256] = "";
  assert_int_equal(bs_dev_groups_collect(p, &s, err, sizeof err), 0);
  assert_true(s.n >= 6);       /* 4 tp groups, 2 dp x cp groups */
  assert_true(s.nlayers >= 2); /* each rank is in one of each: they cannot share a layer */
  bs_dev_groups_free(&s);
  bs_plan_free(p);
  check_groups(&c, -1);
}

static void test_group_layers(void **state) {
  (void)state;
  /* overlapping groups (the tp and dp groups of a grid) go to different layers */
  bs_dev_groups s = {0};
  bs_dev_group g[] = {{{0, 1, 2}, -1}, {{2, 1, 2}, -1}, {{0, 2, 2}, -1}, {{1, 2, 2}, -1}};
  s.groups = g;
  s.n = 4;
  /* the layering of bs_dev_groups_collect, applied by hand: {0,1},{2,3} disjoint; {0,2} and {1,3} overlap them */
  g[0].layer = g[1].layer = 0;
  g[2].layer = g[3].layer = 1;
  s.nlayers = 2;
  int key;
  assert_int_equal(bs_dev_group_colour(&s, 0, 3, &key), 1);
  assert_int_equal(key, 1);
  assert_int_equal(bs_dev_group_colour(&s, 1, 3, &key), 1);
  assert_int_equal(key, 1);
  assert_int_equal(bs_dev_group_colour(&s, 1, 2, &key), 0);
  assert_int_equal(key, 1);
  assert_true(setup_completes(&s, 4));
}

/* ---------------- the schedule ---------------- */

#define NB BS_WL_MAX_BUFS

typedef struct {
  int ordered[NB];  /* the kernels that touched the buffer are ordered before the next transfer */
  int incoming[NB]; /* handle of a transfer writing it, not yet waited for (-1: none) */
  int outgoing[NB]; /* handle of a transfer reading it, not yet waited for (-1: none) */
} hazards;

static void touch_refs(const bs_compute *c, int *bufs, int *n) {
  *n = 0;
  for (int i = 0; i < BS_OP_IN; i++)
    if (c->in[i].buf >= 0) bufs[(*n)++] = c->in[i].buf;
  for (int i = 0; i < BS_OP_OUT; i++)
    if (c->out[i].buf >= 0) bufs[(*n)++] = c->out[i].buf;
}

/* Replays rank's program under the schedule and asserts every hazard is ordered; returns COMM_AFTERs / SYNCs. */
static int replay(const bs_plan *p, int rank, bs_xport_kind x, int *launches) {
  static hazards hz;
  for (int b = 0; b < NB; b++) {
    hz.ordered[b] = 1;
    hz.incoming[b] = hz.outgoing[b] = -1;
  }
  bs_dev_sched s;
  bs_dev_sched_init(&s, x);
  bs_plan_iter *it = bs_plan_iter_new(p, rank);
  bs_op op;
  bs_dev_action a[BS_DEV_MAX_ACTIONS];
  int orders = 0, open_compute = 0;
  *launches = 0;
  while (bs_plan_next(it, &op)) {
    int n = bs_dev_schedule(&s, &op, a);
    assert_true(n >= 1 && n <= BS_DEV_MAX_ACTIONS);
    for (int i = 0; i < n; i++) {
      switch (a[i].kind) {
      case BS_DEV_HOST:
        assert_true(op.kind == BS_OP_ALLOC || op.kind == BS_OP_FREE);
        if (op.kind == BS_OP_ALLOC) {
          hz.ordered[op.u.alloc.buf] = 1;
          hz.incoming[op.u.alloc.buf] = hz.outgoing[op.u.alloc.buf] = -1;
        }
        break;
      case BS_DEV_MARK:
        if (a[i].detail == BS_MARK_COMPUTE_BEGIN) open_compute++;
        if (a[i].detail == BS_MARK_COMPUTE_END) open_compute--;
        assert_true(open_compute == 0 || open_compute == 1);
        break;
      case BS_DEV_LAUNCH: {
        assert_int_equal(op.kind, BS_OP_COMPUTE);
        assert_int_equal(open_compute, 1); /* between its two marks */
        (*launches)++;
        int bufs[BS_OP_IN + BS_OP_OUT], nb;
        touch_refs(&op.u.compute, bufs, &nb);
        for (int j = 0; j < nb; j++) {
          if (hz.incoming[bufs[j]] >= 0)
            fail_msg("rank %d step %d: a kernel touches buffer %d while handle %d still writes it", rank, op.step,
                     bufs[j], hz.incoming[bufs[j]]);
          if (x == BS_XPORT_NCCL && hz.outgoing[bufs[j]] >= 0 && op.u.compute.out[0].buf == bufs[j])
            fail_msg("rank %d step %d: a kernel writes buffer %d while handle %d still sends it", rank, op.step,
                     bufs[j], hz.outgoing[bufs[j]]);
          hz.ordered[bufs[j]] = 0;
        }
        break;
      }
      case BS_DEV_COMM_AFTER:
      case BS_DEV_SYNC_COMPUTE:
        assert_int_equal(a[i].kind == BS_DEV_COMM_AFTER, x == BS_XPORT_NCCL);
        orders++;
        for (int b = 0; b < NB; b++) hz.ordered[b] = 1;
        break;
      case BS_DEV_DOWNLOAD: {
        assert_int_equal(x, BS_XPORT_MPI);
        int b = op.kind == BS_OP_COLL ? op.u.coll.send.buf : op.u.p2p.buf.buf;
        if (b >= 0 && !hz.ordered[b])
          fail_msg("rank %d step %d: send data of buffer %d copied before its kernels end", rank, op.step, b);
        break;
      }
      case BS_DEV_POST: {
        assert_true(op.kind == BS_OP_SEND || op.kind == BS_OP_RECV || op.kind == BS_OP_COLL);
        int in = op.kind == BS_OP_COLL ? op.u.coll.send.buf : op.kind == BS_OP_SEND ? op.u.p2p.buf.buf : -1;
        int outb = op.kind == BS_OP_COLL ? op.u.coll.recv.buf : op.kind == BS_OP_RECV ? op.u.p2p.buf.buf : -1;
        if (in >= 0 && !hz.ordered[in])
          fail_msg("rank %d step %d: buffer %d sent before its kernels end", rank, op.step, in);
        if (outb >= 0 && !hz.ordered[outb])
          fail_msg("rank %d step %d: buffer %d received into before the kernels touching it end", rank, op.step, outb);
        if (in >= 0) hz.outgoing[in] = op.handle;
        if (outb >= 0) hz.incoming[outb] = op.handle;
        break;
      }
      case BS_DEV_STREAM_WAIT:
      case BS_DEV_UPLOAD:
        assert_int_equal(a[i].kind == BS_DEV_STREAM_WAIT, x == BS_XPORT_NCCL);
        for (int b = 0; b < NB; b++) {
          if (hz.incoming[b] == a[i].handle) hz.incoming[b] = -1;
          if (hz.outgoing[b] == a[i].handle) hz.outgoing[b] = -1;
        }
        break;
      case BS_DEV_HOST_WAIT:
        assert_int_equal(x, BS_XPORT_MPI);
        assert_true(i + 1 < n && a[i + 1].kind == BS_DEV_UPLOAD && a[i + 1].handle == a[i].handle);
        break;
      }
    }
  }
  assert_int_equal(bs_plan_iter_error(it), 0);
  bs_plan_iter_free(it);
  assert_int_equal(open_compute, 0);
  return orders;
}

static void check_schedule(const bs_config *c) {
  bs_plan *p = make_plan(c);
  for (int r = 0; r < bs_plan_ranks(p); r++)
    for (int x = 0; x < 2; x++) {
      int launches = 0, orders = replay(p, r, (bs_xport_kind)x, &launches);
      assert_true(launches > 0);
      /* one event per burst of kernels before a transfer, never one per transfer */
      assert_true(orders <= launches);
    }
  bs_plan_free(p);
}

static void test_schedule_ring_steps(void **state) {
  (void)state;
  bs_config c;
  const bs_method ms[] = {BS_BURST, BS_RING};
  for (int m = 0; m < 2; m++)
    for (int G = 2; G <= 4; G++) {
      base_config(&c, ms[m], G);
      check_schedule(&c);
      c.work.phase = BS_PREFILL;
      check_schedule(&c);
    }
}

static void test_schedule_collectives(void **state) {
  (void)state;
  bs_config c;
  base_config(&c, BS_ULYSSES, 4);
  check_schedule(&c);
  base_config(&c, BS_USP, 4);
  c.par.ulysses_degree = 2;
  check_schedule(&c);
}

static void test_schedule_ops(void **state) {
  (void)state;
  bs_dev_sched s;
  bs_dev_action a[BS_DEV_MAX_ACTIONS];
  bs_op comp = {.kind = BS_OP_COMPUTE}, send = {.kind = BS_OP_SEND, .handle = 3},
        recv = {.kind = BS_OP_RECV, .handle = 4};
  bs_op wait = {.kind = BS_OP_WAIT};
  wait.u.wait.n = 2;
  wait.u.wait.handles[0] = 3;
  wait.u.wait.handles[1] = 4;
  /* NCCL: mark, launch, mark; one comm-after before the first post only; the wait is two stream waits */
  bs_dev_sched_init(&s, BS_XPORT_NCCL);
  assert_int_equal(bs_dev_schedule(&s, &comp, a), 3);
  assert_int_equal(a[1].kind, BS_DEV_LAUNCH);
  assert_int_equal(bs_dev_schedule(&s, &send, a), 2);
  assert_int_equal(a[0].kind, BS_DEV_COMM_AFTER);
  assert_int_equal(a[1].kind, BS_DEV_POST);
  assert_int_equal(a[1].handle, 3);
  assert_int_equal(bs_dev_schedule(&s, &recv, a), 1);
  assert_int_equal(bs_dev_schedule(&s, &wait, a), 4);
  assert_int_equal(a[0].detail, BS_MARK_WAIT_BEGIN);
  assert_int_equal(a[1].kind, BS_DEV_STREAM_WAIT);
  assert_int_equal(a[2].handle, 4);
  assert_int_equal(a[3].detail, BS_MARK_WAIT_END);
  /* MPI: the send is synchronised and staged; the wait blocks the host, then copies up */
  bs_dev_sched_init(&s, BS_XPORT_MPI);
  bs_dev_schedule(&s, &comp, a);
  assert_int_equal(bs_dev_schedule(&s, &send, a), 3);
  assert_int_equal(a[0].kind, BS_DEV_SYNC_COMPUTE);
  assert_int_equal(a[1].kind, BS_DEV_DOWNLOAD);
  assert_int_equal(bs_dev_schedule(&s, &recv, a), 1);
  assert_int_equal(bs_dev_schedule(&s, &wait, a), 6);
  assert_int_equal(a[1].kind, BS_DEV_HOST_WAIT);
  assert_int_equal(a[2].kind, BS_DEV_UPLOAD);
}

static void test_times(void **state) {
  (void)state;
  bs_dev_times t;
  bs_dev_times_init(&t);
  /* compute 0-2 and 5-6 ms, a wait 2-5 ms: 3 ms compute, 3 ms exposed */
  const struct {
    bs_dev_mark_kind k;
    double ms;
  } m[] = {{BS_MARK_COMPUTE_BEGIN, 0}, {BS_MARK_COMPUTE_END, 2},   {BS_MARK_WAIT_BEGIN, 2}, {BS_MARK_WAIT_END, 5},
           {BS_MARK_PHASE, 5},         {BS_MARK_COMPUTE_BEGIN, 5}, {BS_MARK_COMPUTE_END, 6}};
  for (size_t i = 0; i < sizeof m / sizeof m[0]; i++) assert_int_equal(bs_dev_times_add(&t, m[i].k, m[i].ms), 0);
  assert_true(t.compute_s > 0.003 - 1e-12 && t.compute_s < 0.003 + 1e-12);
  assert_true(t.exposed_s > 0.003 - 1e-12 && t.exposed_s < 0.003 + 1e-12);
  assert_int_equal(bs_dev_times_add(&t, BS_MARK_COMPUTE_END, 7), -1); /* no open interval */
  assert_int_equal(bs_dev_times_add(&t, BS_MARK_WAIT_BEGIN, 8), 0);
  assert_int_equal(bs_dev_times_add(&t, BS_MARK_WAIT_END, 7.5), -1); /* time going back */
}

static void test_staging_bytes(void **state) {
  (void)state;
  /* a ring's staging: at most the K,V blocks of the transfers in flight at once; a hand bound:
   * with double buffering, two steps of (send + receive) of K and V blocks */
  bs_config c;
  base_config(&c, BS_RING, 4);
  c.work.phase = BS_PREFILL;
  bs_plan *p = make_plan(&c);
  bs_dev_bytes b;
  char err[256] = "";
  assert_int_equal(bs_dev_bytes_of(p, 1, &b, err, sizeof err), 0);
  int64_t block = (int64_t)c.model.kv_heads * (c.work.seq_len / 4) * c.model.head_dim * 4; /* one K block, fp32 */
  assert_true(b.staging >= 4 * block);     /* K and V, sent and received */
  assert_true(b.staging <= 2 * 4 * block); /* at most two steps in flight */
  assert_true(b.peak > 0 && b.largest > 0 && b.largest <= b.peak);
  bs_plan_free(p);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_pairs),
    cmocka_unit_test(test_pick),
    cmocka_unit_test(test_sharing),
    cmocka_unit_test(test_groups),
    cmocka_unit_test(test_group_layers),
    cmocka_unit_test(test_schedule_ops),
    cmocka_unit_test(test_schedule_ring_steps),
    cmocka_unit_test(test_schedule_collectives),
    cmocka_unit_test(test_times),
    cmocka_unit_test(test_staging_bytes),
  };
  return bs_run_named("devplan", tests, sizeof tests / sizeof tests[0], argc, argv, NULL, NULL);
}
