/*
 * profile.h — everything the simulator knows about hardware, read from and
 * written to a JSON profile (the shipped calib/profiles JSON files are built from public
 * figures; `burstsim calib` writes measured ones in the same format).
 *
 * FORMAT (version 1). Every number is an object {"value": X, "source": "..."}
 * where source cites a public source (paper, datasheet, issue, URL), says "(derived) <arithmetic>", or for
 * calibrated profiles names the measurement. Tables carry one "source" each.
 *
 * {
 *   "format": 1,
 *   "name": "a100-sxm4-80gb",
 *   "description": "...",
 *   "machine": "...", "date": "...",                 (calibrated profiles)
 *   "device": {
 *     "memory_bytes":  {"value": 80e9, "source": "..."},   capacity for OOM
 *     "peak_flops":    {...},   dense tensor FLOP/s (GEMM, unfused attention)
 *     "mem_bw_Bps":    {...},   device memory bandwidth (memory-bound kernels)
 *     "peak_flops_fp8": {...},   optional: dense FP8 tensor FLOP/s, the peak of GEMMs that
 *                                model.fp8 runs in FP8 (absent: the device has no FP8 GEMMs)
 *     optional, as a framework holds memory (each absent key leaves its term out):
 *     "reserved_bytes":          {...}   per process, outside the tensors (CUDA context,
 *                                        NCCL buffers): the capacity for OOM is
 *                                        memory_bytes - reserved_bytes
 *     "alloc_round_bytes":       {...}   every allocation larger than alloc_small_bytes is
 *                                        rounded up to a multiple of this (PyTorch's caching
 *                                        allocator: 2 MiB segments for large requests)
 *     "alloc_small_bytes":       {...}   the largest small request (PyTorch: 1 MiB)
 *     "alloc_small_round_bytes": {...}   small requests round up to a multiple of this (512 B)
 *     Rounding is per allocation: the memory a rank holds at its peak is the sum of
 *     its rounded allocations (blocks that share a segment are not modelled; the
 *     model state is counted as allocated, sim/actor.c).
 *   },
 *   "kernels": {                 one entry per bs_kernel name (plans/plan.h)
 *     "attn_fwd": {
 *       "model": "table",        time = launch_s + flops / rate(x, d, mask)
 *       "launch_s": {...},
 *       "tables": [ {"head_dim": 128, "mask": "full" | "causal" | "decode",
 *                    "x": [512, 1024, ...],        x = sqrt(Nq * Nk) tokens
 *                    "tflops": [151, 173, ...],    useful TFLOP/s at x
 *                    "source": "..."} ... ]
 *       rate: the table with the nearest head_dim; "full" for blocks with every
 *       key visible, "causal" for partly masked ones; "decode" (optional) only
 *       for calls of one query row, which take it first; linear in log2(x)
 *       between points, the end values beyond them.
 *       "decode_bw_efficiency": {...}  optional (absent: no memory bound): a call reads K
 *       "decode_launches": {...}       and V once, so it takes at least launches * launch_s +
 *                                      bytes / (mem_bw * decode_bw_efficiency), bytes = B (2 Zkv
 *                                      Nk + 2 Zq Nq) d (element size), launches = decode_launches
 *                                      for calls of at most 64 query rows (split-KV: the split
 *                                      pass and the combine), else 1; the longer of this and the
 *                                      table's time (few query rows: the memory bound)
 *     },
 *     "attn_merge": {
 *       "model": "roofline",     time = launch_s + max(flops / peak, bytes / mem_bw)
 *       "launch_s": {...},
 *       "efficiency": {...}      fraction of peak_flops and mem_bw reached (<= 1)
 *     },
 *     "attn_fwd_unfused": {
 *       "model": "materialised", time = launch_s + flops / (peak * efficiency)
 *                                      + passes * score_bytes / mem_bw
 *       "launch_s", "efficiency", "passes": {...}
 *     },
 *     "gemm": {
 *       "model": "tiled",        time = launch_s + max(bytes / (mem_bw * bw_efficiency),
 *                                      flops / (peak * peak_fraction * q_tw * q_k))
 *       "launch_s", "peak_fraction", "bw_efficiency": {...}     (0, 1]
 *       "tile_m", "tile_n": {...}    output tile of one thread block (integers)
 *       "sms": {...}                 tiles that run at once (one per SM)
 *       "k_overhead": {...}          fixed per-tile cost in K elements (>= 0)
 *       "min_tile": {...}            optional (absent: none): the MMA's smallest tile side; a
 *                                    GEMM side below min(tile_m, tile_n) (a decode step's few
 *                                    token rows) is tiled at that side rounded up to it, against
 *                                    max(tile_m, tile_n), when that quantizes better
 *       "peak_fraction_fp8": {...}   optional (absent: peak_fraction): the fraction of
 *                                    device.peak_flops_fp8 FP8 GEMMs (model.fp8) reach in place
 *                                    of peak_fraction
 *       q_tw = m n batch / (waves * sms * tile_m * tile_n), waves =
 *       ceil(tiles / sms), tiles = batch ceil(m / tile_m) ceil(n / tile_n):
 *       tile padding and the last partial wave, the better of the two tile
 *       orientations (tile_m x tile_n or tile_n x tile_m); q_k = k / (k +
 *       k_overhead); batch = flops / (2 m n k) independent GEMMs (per head).
 *     }
 *     The bytes a roofline kernel moves come from its shape (profile.c).
 *   },
 *   "attention_kernels": {       optional: the fused attention kernels a job may choose
 *     "default": {"value": "fa2", "source": "..."},   the one kernels.attn_fwd / attn_bwd hold
 *     "fa3": {"attn_fwd": {table model}, "attn_bwd": {table model}},  "cudnn", "fa2" alike
 *   },                           (model.attention_kernel; bs_profile_save leaves it out)
 *   "links": {                   one entry per link class (topologies/topo.h)
 *     "nvlink": {"bandwidth_Bps": {...}, "latency_s": {...},
 *                "factors": [ {"min_bytes": 0, "bandwidth": 1.0, "latency": 1.0} ],
 *                "source": "..."}     factors: piecewise by message size
 *   },
 *   "network": {"model": "CM02", "crosstraffic": 0, "tcp_gamma": 0, "source": "..."},
 *   "collectives": {             optional; absent = 0 (calibrated profiles: base_s from a cold call)
 *     "base_s": {...}            fixed cost of every collective call (NCCL's per-call base
 *                                latency: its kernel launch and the channels' setup), paid once
 *                                per call before the algorithm's steps, whatever the algorithm
 *     "allreduce": {"value": "nccl" | "open-mpi-libnbc", "source": "..."}
 *                                optional, absent = "nccl": whose allreduce runs. nccl: ring or
 *                                tree as cluster.coll_algo says. open-mpi-libnbc: Open MPI 4.1's
 *                                non-blocking MPI_Iallreduce (the runtime's MPI backend): below
 *                                4 ranks or 64 KiB a binomial reduce to the first member and a
 *                                binomial broadcast back (sim/coll_shape.h), else the ring
 *   },
 *   "p2p": {                     optional; absent = no effect (calibrated host profiles leave it out)
 *     "intra_node": {"base_s": {...}, "efficiency": {...}},   each route and key optional
 *     "inter_node": {"base_s": {...}, "efficiency": {...}}
 *                                only the plans' SEND/RECV (ring attention's K,V blocks, pass-Q,
 *                                pipeline sends), never a collective's steps: base_s is paid once
 *                                per send before its transfer (NCCL's per-call cost of
 *                                ncclSend/ncclRecv); efficiency in (0, 1] is the fraction of the
 *                                route's bandwidth a send reaches (NCCL's p2p runs on fewer
 *                                channels than its collectives): B bytes move as B / efficiency
 *                                on the links (size factors looked up at that size), while every
 *                                byte counter (sent, received, per link) keeps B. The route is
 *                                intra_node when both ranks are on one node.
 *   },
 *   "host": {"speed_flops": {...}, "cores": {...}}      (host topology only)
 * }
 */
#ifndef BURSTSIM_PROFILE_H
#define BURSTSIM_PROFILE_H

#include <stddef.h>
#include <stdint.h>
#include "plans/plan.h"
#include "topologies/topo.h"

#define BS_PROF_MAX_TABLES 12
#define BS_PROF_MAX_POINTS 16
#define BS_PROF_MAX_FACTORS 8

typedef enum { BS_KM_NONE = 0, BS_KM_TABLE, BS_KM_ROOFLINE, BS_KM_MATERIALISED, BS_KM_TILED } bs_kmodel_kind;

typedef struct {
  int head_dim;
  int causal; /* 0 "full", 1 "causal" */
  int n;
  double x[BS_PROF_MAX_POINTS];
  double tflops[BS_PROF_MAX_POINTS];
  /* 1: mask "decode": one query row against x^2 keys, for calls of one query row (memory-bound on a
   * GPU: a block of the same x runs a hundred times faster); other calls never read it */
  int decode;
} bs_prof_table;

typedef struct {
  bs_kmodel_kind kind;
  double launch_s;
  double efficiency; /* roofline, materialised */
  double passes;     /* materialised: reads + writes of the score block */
  /* tiled (GEMM): tile and wave quantization over `sms` units */
  double peak_fraction; /* of peak_flops reached by full tiles in full waves */
  double bw_efficiency; /* of mem_bw_Bps reached by the operand traffic */
  int tile_m, tile_n;   /* output tile of one thread block */
  int sms;              /* tiles running at once (one per SM) */
  double k_overhead;    /* fixed per-tile cost, in K elements */
  int min_tile;         /* tiled: the MMA's smallest tile side (0 = none) */
  /* tiled: the fraction of peak_flops_fp8 FP8 GEMMs (model.fp8) reach; absent: peak_fraction */
  double peak_fraction_fp8;
  /* table (attn_fwd): split-KV decode's memory bound (0 = none) */
  double decode_bw_efficiency; /* fraction of mem_bw_Bps a call reading K and V reaches */
  int decode_launches;         /* kernels of a split-KV call (the split pass and the combine) */
  int ntables;
  bs_prof_table tables[BS_PROF_MAX_TABLES];
} bs_kernel_model;

typedef struct {
  double min_bytes, bandwidth, latency;
} bs_prof_factor;

/* Whose allreduce algorithms a profile's collectives run (profile "collectives.allreduce"). */
typedef enum { BS_ALLREDUCE_NCCL = 0, BS_ALLREDUCE_OMPI_LIBNBC, BS_ALLREDUCE_LIB_COUNT } bs_allreduce_lib;
const char *bs_allreduce_lib_name(bs_allreduce_lib l);

typedef struct {
  int present;
  double bw_Bps, lat_s;
  int nfactors;
  bs_prof_factor factors[BS_PROF_MAX_FACTORS];
} bs_prof_link;

typedef struct {
  char name[64];
  char path[512];
  double memory_bytes, peak_flops, mem_bw_Bps;
  double peak_flops_fp8;           /* dense FP8 tensor FLOP/s (0 = the device has none) */
  int64_t reserved_bytes;          /* per process, outside the tensors (0 = none) */
  int64_t alloc_round_bytes;       /* granule of large allocations (0 or 1 = exact) */
  int64_t alloc_small_bytes;       /* the largest small allocation (0 = none is small) */
  int64_t alloc_small_round_bytes; /* granule of small allocations (0 or 1 = exact) */
  bs_kernel_model kernel[BS_K_COUNT];
  bs_prof_link link[BS_LINK_CLASS_COUNT];
  char net_model[32];
  int crosstraffic;
  double tcp_gamma;
  double coll_base_s;             /* fixed cost of one collective call, s (0 = none) */
  bs_allreduce_lib allreduce_lib; /* whose allreduce algorithms run (0 = NCCL's) */
  /* point-to-point SEND/RECV of the plans, never collectives; [0] intra-node, [1] inter-node */
  double p2p_base_s[2];     /* fixed cost of one send, s (0 = none) */
  double p2p_efficiency[2]; /* fraction of the route's bandwidth a send reaches (0 or 1 = all) */
  /* model.attention_kernel: the rates of each fused attention kernel the profile holds
   * ("attention_kernels"), [kernel][0] forward and [1] backward; attn_default is the kernel whose
   * rates kernels.attn_fwd / attn_bwd hold (BS_ATTN_KERNEL_DEFAULT when the profile names none) */
  bs_attn_kernel attn_default;
  int attn_have[BS_ATTN_KERNEL_COUNT];
  bs_kernel_model attn_rates[BS_ATTN_KERNEL_COUNT][2];
  double host_speed; /* host topology: flop/s of the shared CPU (0 = none) */
  int host_cores;
} bs_profile;

/* The file a profile name means: a path ending in .json as is, otherwise
 * PROFILE_DIR/<name>.json where PROFILE_DIR is $BURSTSIM_PROFILE_DIR, else the
 * calib/profiles directory of the source tree this binary was built from. */
void bs_profile_path(const char *name, char *out, size_t outlen);

/* Reads and checks a profile. Returns 0, or -1 with "FILE: key: what" in err. */
int bs_profile_load(const char *name_or_path, bs_profile *p, char *err, size_t errlen);

/* Makes kernels.attn_fwd / attn_bwd hold the rates of kernel k (model.attention_kernel; the default
 * one: the profile's attention_kernels.default, as loaded): 0, or -1 with "model.attention_kernel:
 * ..." naming the kernels the profile holds when it has no rates for k. */
int bs_profile_use_attention(bs_profile *p, bs_attn_kernel k, char *err, size_t errlen);

/* p as a profile JSON object with the given source string on every value (the caller deletes it). */
struct cJSON;
struct cJSON *bs_profile_to_json(const bs_profile *p, const char *source);

/* Writes p as JSON with the given source string on every value (calibration), through
 * base/fileio.h: the old file stays whole until the new one is complete. */
int bs_profile_save(const bs_profile *p, const char *path, const char *source, char *err, size_t errlen);

/*
 * Modelled duration in seconds of a COMPUTE op with storage type dt, or -1
 * with a message when the profile has no model for its kernel.
 */
double bs_profile_kernel_time(const bs_profile *p, const bs_compute *c, bs_dtype dt, char *err, size_t errlen);

/* The bytes an allocation of `bytes` holds once the profile's allocator rounding is applied. */
int64_t bs_profile_alloc_bytes(const bs_profile *p, int64_t bytes);

/* The device memory tensors may use: memory_bytes less the per-process reserve. */
int64_t bs_profile_capacity_bytes(const bs_profile *p);

/* Puts the profile's link classes into topology parameters. */
void bs_profile_apply_topo(const bs_profile *p, bs_topo_params *t);

#endif
