/*
 * test_profile_input.c — the bad-input table of the profile loader: from one
 * valid profile, each case changes one thing (NaN, inf, negative, out of
 * range, missing, wrong type, duplicate, unknown name) and expects
 * bs_profile_load to fail with a message naming the file and the key at fault.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include "tests/run_named.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "profile/profile.h"

static char dir[64];

/* One valid profile; every case below replaces one unique piece of it. */
static const char *base =
  "{\"format\": 1, \"name\": \"t\",\n"
  " \"device\": {\"memory_bytes\": {\"value\": 8e10, \"source\": \"s\"},\n"
  "            \"peak_flops\": {\"value\": 3e14, \"source\": \"s\"},\n"
  "            \"mem_bw_Bps\": {\"value\": 2e12, \"source\": \"s\"}},\n"
  " \"kernels\": {\n"
  "  \"attn_fwd\": {\"model\": \"table\", \"launch_s\": {\"value\": 1e-5, \"source\": \"s\"},\n"
  "    \"tables\": [{\"head_dim\": 128, \"mask\": \"full\", \"x\": [512, 4096], \"tflops\": [100, 180], \"source\": "
  "\"s\"}]},\n"
  "  \"attn_merge\": {\"model\": \"roofline\", \"launch_s\": {\"value\": 0, \"source\": \"s\"},\n"
  "    \"efficiency\": {\"value\": 0.8, \"source\": \"s\"}},\n"
  "  \"gemm\": {\"model\": \"tiled\", \"launch_s\": {\"value\": 2e-6, \"source\": \"s\"},\n"
  "    \"peak_fraction\": {\"value\": 0.75, \"source\": \"s\"}, \"bw_efficiency\": {\"value\": 0.95, \"source\": "
  "\"s\"},\n"
  "    \"tile_m\": {\"value\": 128, \"source\": \"s\"}, \"tile_n\": {\"value\": 256, \"source\": \"s\"},\n"
  "    \"sms\": {\"value\": 132, \"source\": \"s\"}, \"k_overhead\": {\"value\": 16, \"source\": \"s\"}}},\n"
  " \"links\": {\"nvlink\": {\"bandwidth_Bps\": {\"value\": 2e11, \"source\": \"s\"},\n"
  "   \"latency_s\": {\"value\": 1e-6, \"source\": \"s\"},\n"
  "   \"factors\": [{\"min_bytes\": 0, \"bandwidth\": 0.9, \"latency\": 1.0}], \"source\": \"s\"}},\n"
  " \"network\": {\"model\": \"CM02\", \"crosstraffic\": 0, \"tcp_gamma\": 0},\n"
  " \"host\": {\"speed_flops\": {\"value\": 1e10, \"source\": \"s\"}, \"cores\": {\"value\": 2, \"source\": \"s\"}}}\n";

typedef struct {
  const char *from, *to; /* the piece of base replaced, and by what */
  const char *needle;    /* the error must name this (besides the file) */
} bad_case;

/* Where the memory-term cases put a device key: after mem_bw_Bps. */
#define MEM_KEY(k, v) "\"value\": 2e12, \"source\": \"s\"}, \"" k "\": {\"value\": " v ", \"source\": \"s\"}}"
#define MEM_AT "\"value\": 2e12, \"source\": \"s\"}}"

static const bad_case cases[] = {
  /* NaN and inf: NaN is no JSON literal (a syntax error at its line); 1e999 parses as inf */
  {"\"value\": 8e10", "\"value\": NaN", ":2: not valid JSON"},
  {"\"value\": 8e10", "\"value\": 1e999", "device.memory_bytes: value is not a finite number"},
  {"\"value\": 3e14", "\"value\": -1e999", "device.peak_flops: value is not a finite number"},
  {"\"value\": 1e-5", "\"value\": 1e999", "kernels.attn_fwd.launch_s: value is not a finite number"},
  {"\"tflops\": [100, 180]", "\"tflops\": [100, 1e999]", "kernels.attn_fwd.tables[0]: point 1"},
  {"\"bandwidth\": 0.9", "\"bandwidth\": 1e999", "links.nvlink.factors[0]"},
  {"\"value\": 2e11", "\"value\": 1e999", "links.nvlink.bandwidth_Bps: value is not a finite number"},
  {"\"tcp_gamma\": 0", "\"tcp_gamma\": 1e999", "network.tcp_gamma"},
  /* negative and out of range */
  {"\"value\": 8e10", "\"value\": -8e10", "memory_bytes"},
  {"\"value\": 8e10", "\"value\": 1e30", "device.memory_bytes: 1e+30 is more than 2^62"},
  {"\"value\": 1e-5", "\"value\": -1e-5", "kernels.attn_fwd.launch_s: -1e-05 is out of range [0, 1] s"},
  {"\"value\": 0.8", "\"value\": 1.5", "kernels.attn_merge.efficiency: must be in (0, 1]"},
  {"\"value\": 2e11", "\"value\": -2e11", "links.nvlink.bandwidth_Bps: -2e+11 is out of range [1000, 1e+14] B/s"},
  {"\"value\": 1e-6", "\"value\": -1e-6", "links.nvlink.latency_s: -1e-06 is out of range [0, 1] s"},
  {"\"head_dim\": 128", "\"head_dim\": 0", "kernels.attn_fwd.tables[0].head_dim"},
  {"\"head_dim\": 128", "\"head_dim\": 1e12", "kernels.attn_fwd.tables[0].head_dim"},
  {"[512, 4096]", "[4096, 512]", "kernels.attn_fwd.tables[0]: point 1"},
  {"[100, 180]", "[100, -180]", "kernels.attn_fwd.tables[0]: point 1"},
  {"\"latency\": 1.0", "\"latency\": -1", "links.nvlink.factors[0]"},
  /* the optional per-call collective cost */
  {"\"network\": {", "\"collectives\": {\"base_s\": {\"value\": -1e-6, \"source\": \"s\"}}, \"network\": {",
   "collectives.base_s: -1e-06 is out of range [0, 1] s"},
  {"\"network\": {", "\"collectives\": {\"base_s\": {\"value\": 1e999, \"source\": \"s\"}}, \"network\": {",
   "collectives.base_s: value is not a finite number"},
  {"\"network\": {", "\"collectives\": {\"base_s\": {\"value\": 5e-6}}, \"network\": {",
   "collectives.base_s: needs {\"value\": number, \"source\": \"...\"}"},
  {"\"network\": {", "\"collectives\": {\"base\": {\"value\": 5e-6, \"source\": \"s\"}}, \"network\": {",
   "collectives.base: unknown key (base_s, allreduce)"},
  {"\"network\": {", "\"collectives\": 5e-6, \"network\": {", "collectives: must be an object"},
  /* the optional point-to-point costs */
  {"\"network\": {", "\"p2p\": {\"inter_node\": {\"base_s\": {\"value\": -1e-6, \"source\": \"s\"}}}, \"network\": {",
   "p2p.inter_node.base_s: -1e-06 is out of range [0, 1] s"},
  {"\"network\": {", "\"p2p\": {\"intra_node\": {\"efficiency\": {\"value\": 0, \"source\": \"s\"}}}, \"network\": {",
   "p2p.intra_node.efficiency: 0 is out of range [0.001, 1]"},
  {"\"network\": {", "\"p2p\": {\"intra_node\": {\"efficiency\": {\"value\": 1.5, \"source\": \"s\"}}}, \"network\": {",
   "p2p.intra_node.efficiency: 1.5 is out of range [0.001, 1]"},
  {"\"network\": {", "\"p2p\": {\"inter_node\": {\"efficiency\": {\"value\": 0.5}}}, \"network\": {",
   "p2p.inter_node.efficiency: needs {\"value\": number, \"source\": \"...\"}"},
  {"\"network\": {", "\"p2p\": {\"nvlink\": {}}, \"network\": {", "p2p.nvlink: unknown key (intra_node, inter_node)"},
  {"\"network\": {", "\"p2p\": {\"inter_node\": {\"base\": 1}}, \"network\": {",
   "p2p.inter_node.base: unknown key (base_s, efficiency)"},
  {"\"network\": {", "\"p2p\": {\"inter_node\": 5}, \"network\": {", "p2p.inter_node: must be an object"},
  {"\"network\": {", "\"p2p\": 5, \"network\": {", "p2p: must be an object"},
  {"\"crosstraffic\": 0", "\"crosstraffic\": 2", "network.crosstraffic"},
  {"\"tcp_gamma\": 0", "\"tcp_gamma\": -1", "network.tcp_gamma"},
  {"\"value\": 2, \"source\"", "\"value\": 0, \"source\"", "host: speed_flops > 0 and cores >= 1"},
  {"\"value\": 2, \"source\"", "\"value\": 1e300, \"source\"", "host: speed_flops > 0 and cores >= 1"},
  {"\"format\": 1", "\"format\": 2", "format: must be 1"},
  {"\"format\": 1", "\"format\": 1.5", "format: must be 1"},
  {"\"head_dim\": 128", "\"head_dim\": 127.5", "kernels.attn_fwd.tables[0].head_dim: must be a whole number"},
  /* finite but outside the physical ranges (they would overflow the simulated clock or the byte counts) */
  {"\"value\": 2e11", "\"value\": 1e-300", "links.nvlink.bandwidth_Bps: 1e-300 is out of range [1000, 1e+14] B/s"},
  {"\"value\": 2e11", "\"value\": 1e15", "links.nvlink.bandwidth_Bps: 1e+15 is out of range"},
  {"\"value\": 1e-6", "\"value\": 5", "links.nvlink.latency_s: 5 is out of range [0, 1] s"},
  {"\"value\": 1e-5", "\"value\": 1e300", "kernels.attn_fwd.launch_s: 1e+300 is out of range"},
  {"\"value\": 3e14", "\"value\": 1e300", "device.peak_flops: 1e+300 is out of range [1e+06, 1e+17] FLOP/s"},
  {"\"value\": 3e14", "\"value\": 1e-300", "device.peak_flops: 1e-300 is out of range"},
  {"\"value\": 2e12", "\"value\": 1e-300", "device.mem_bw_Bps: 1e-300 is out of range [1000, 1e+14] B/s"},
  {"\"value\": 8e10", "\"value\": 10", "device.memory_bytes: 10 is out of range [1e+06, "},
  {"[100, 180]", "[100, 1e300]",
   "kernels.attn_fwd.tables[0].tflops[1]: 1e+300 is out of range [1e-06, 100000] TFLOP/s"},
  {"[100, 180]", "[1e-300, 180]", "kernels.attn_fwd.tables[0].tflops[0]: 1e-300 is out of range"},
  {"[512, 4096]", "[512, 1e300]", "kernels.attn_fwd.tables[0].x[1]: 1e+300 is out of range"},
  {"\"value\": 0.8", "\"value\": 1e-300", "kernels.attn_merge.efficiency: 1e-300 is out of range [0.0001, 1]"},
  {"\"value\": 0.75", "\"value\": 1e-9", "kernels.gemm.peak_fraction: 1e-09 is out of range"},
  {"\"bandwidth\": 0.9", "\"bandwidth\": 1e-300", "links.nvlink.factors[0].bandwidth: 1e-300 is out of range"},
  {"\"bandwidth\": 0.9", "\"bandwidth\": 900", "links.nvlink.factors[0].bandwidth: 1.8e+14 is out of range"},
  {"\"latency\": 1.0", "\"latency\": 1e300", "links.nvlink.factors[0].latency: 1e+300 is out of range"},
  {"\"min_bytes\": 0", "\"min_bytes\": 1e300", "links.nvlink.factors[0].min_bytes: 1e+300 is out of range"},
  {"\"tcp_gamma\": 0", "\"tcp_gamma\": 1e300", "network.tcp_gamma: 1e+300 is out of range"},
  {"\"value\": 1e10", "\"value\": 1e300", "host.speed_flops: 1e+300 is out of range [1e+06, 1e+17] FLOP/s"},
  /* a key twice in one object: cJSON keeps both and reads the first, so the second would be ignored */
  {"\"name\": \"t\"", "\"format\": 1", ":1: format: given twice"},
  {"\"peak_flops\": {\"value\": 3e14", "\"memory_bytes\": {\"value\": 3e14", ":3: device.memory_bytes: given twice"},
  {"\"value\": 2e12", "\"value\": 2e12, \"value\": 1", ":4: device.mem_bw_Bps.value: given twice"},
  {"\"latency\": 1.0", "\"bandwidth\": 1.0", ":16: links.nvlink.factors[0].bandwidth: given twice"},
  {"\"mask\": \"full\"", "\"mask\": \"full\", \"mask\": \"causal\"",
   ":7: kernels.attn_fwd.tables[0].mask: given twice"},
  /* missing */
  {"\"format\": 1, ", "", "format: must be 1"},
  {"\"peak_flops\": {\"value\": 3e14, \"source\": \"s\"},", "", "device.peak_flops: missing"},
  {"\"launch_s\": {\"value\": 1e-5, \"source\": \"s\"},", "", "kernels.attn_fwd.launch_s: missing"},
  {"\"efficiency\": {\"value\": 0.8, \"source\": \"s\"}", "\"x\": 1", "kernels.attn_merge.efficiency: missing"},
  {"\"latency_s\": {\"value\": 1e-6, \"source\": \"s\"},", "", "links.nvlink.latency_s: missing"},
  {"{\"value\": 8e10, \"source\": \"s\"}", "{\"value\": 8e10}", "device.memory_bytes: needs"},
  {"\"model\": \"table\", ", "", "kernels.attn_fwd.model: missing"},
  {"], \"source\": \"s\"}},\n \"network\"", "]}},\n \"network\"", "links.nvlink: factors need a \"source\""},
  /* wrong types */
  {"\"value\": 8e10", "\"value\": \"8e10\"", "device.memory_bytes: needs"},
  {"\"value\": 2e12", "\"value\": true", "device.mem_bw_Bps: needs"},
  {"\"model\": \"table\"", "\"model\": 3", "kernels.attn_fwd.model: missing"},
  {"\"model\": \"table\"", "\"model\": \"lookup\"", "kernels.attn_fwd.model: unknown 'lookup'"},
  {"\"tables\": [", "\"tables\": 5, \"old\": [", "kernels.attn_fwd.tables"},
  {"\"mask\": \"full\"", "\"mask\": \"half\"", "kernels.attn_fwd.tables[0].mask"},
  {"\"x\": [512, 4096]", "\"x\": [512, \"4096\"]", "kernels.attn_fwd.tables[0]: point 1"},
  {"\"factors\": [", "\"factors\": {\"a\": 1}, \"f\": [", "links.nvlink.factors"},
  {"\"model\": \"CM02\"", "\"model\": 2", "network.model"},
  {"\"model\": \"CM02\"", "\"model\": \"fast\"", "network.model"},
  {"\"network\": {", "\"network\": 7, \"n\": {", "network: must be an object"},
  {"\"crosstraffic\": 0", "\"crosstraffic\": \"no\"", "network.crosstraffic"},
  {"\"device\": {", "\"device\": [], \"d\": {", "device: missing"},
  /* the tiled GEMM model: fractions in (0, 1], whole tile and SM counts, k_overhead >= 0, all required */
  {"\"value\": 0.75", "\"value\": 0", "kernels.gemm.peak_fraction: must be in (0, 1]"},
  {"\"value\": 0.75", "\"value\": 1.2", "kernels.gemm.peak_fraction: must be in (0, 1]"},
  {"\"value\": 0.95", "\"value\": 1e999", "kernels.gemm.bw_efficiency: value is not a finite number"},
  {"\"value\": 0.95", "\"value\": -0.5", "kernels.gemm.bw_efficiency: must be in (0, 1]"},
  {"\"value\": 128", "\"value\": 0", "kernels.gemm.tile_m: must be a whole number in [1, 65536]"},
  {"\"value\": 128", "\"value\": 127.5", "kernels.gemm.tile_m: must be a whole number in [1, 65536]"},
  {"\"value\": 256", "\"value\": 1e6", "kernels.gemm.tile_n: must be a whole number in [1, 65536]"},
  {"\"value\": 256", "\"value\": \"256\"", "kernels.gemm.tile_n: needs"},
  {"\"value\": 132", "\"value\": 0", "kernels.gemm.sms: must be a whole number in [1, 1048576]"},
  {"\"value\": 132", "\"value\": 13.2", "kernels.gemm.sms: must be a whole number"},
  {"\"value\": 16", "\"value\": -16", "kernels.gemm.k_overhead: must be in [0, 2^40]"},
  {"\"value\": 16", "\"value\": 1e999", "kernels.gemm.k_overhead: value is not a finite number"},
  {"\"peak_fraction\": {\"value\": 0.75, \"source\": \"s\"}, ", "", "kernels.gemm.peak_fraction: missing"},
  {"\"sms\": {\"value\": 132, \"source\": \"s\"}, ", "", "kernels.gemm.sms: missing"},
  {", \"k_overhead\": {\"value\": 16, \"source\": \"s\"}", "", "kernels.gemm.k_overhead: missing"},
  {"{\"value\": 132, \"source\": \"s\"}", "{\"value\": 132}", "kernels.gemm.sms: needs"},
  {"\"attn_merge\": {\"model\": \"roofline\"", "\"attn_merge\": {\"model\": \"tiled\"",
   "kernels.attn_merge.model: 'tiled' models GEMMs only"},
  {"\"model\": \"tiled\"", "\"model\": \"tiles\"", "kernels.gemm.model: unknown 'tiles'"},
  /* duplicates and unknown names */
  {"\"attn_merge\":", "\"attn_fwd\":", "kernels.attn_fwd: given twice"},
  {"\"attn_merge\":", "\"attn_fwdd\":", "kernels.attn_fwdd: unknown kernel"},
  {"\"nvlink\":", "\"infiniband\":", "links.infiniband: unknown link class"},
  /* the framework's memory terms: optional whole byte counts; the reserve below memory_bytes */
  {MEM_AT, MEM_KEY("reserved_bytes", "-1"), "device.reserved_bytes: -1 must be a whole number of bytes in [0, "},
  {MEM_AT, MEM_KEY("reserved_bytes", "8e10"),
   "device.reserved_bytes: 8e+10 must be a whole number of bytes in [0, 79999999999]"},
  {MEM_AT, MEM_KEY("reserved_bytes", "3e8.5"), "not valid JSON"},
  {MEM_AT, MEM_KEY("reserved_bytes", "300000000.5"), "device.reserved_bytes: 3e+08 must be a whole number"},
  {MEM_AT, MEM_KEY("reserved_bytes", "1e999"), "device.reserved_bytes: value is not a finite number"},
  {MEM_AT, MEM_KEY("reserved_bytes", "\"3e8\""), "device.reserved_bytes: needs"},
  {MEM_AT, "\"value\": 2e12, \"source\": \"s\"}, \"reserved_bytes\": {\"value\": 3e8}}",
   "device.reserved_bytes: needs"},
  {MEM_AT, MEM_KEY("alloc_round_bytes", "-2"),
   "device.alloc_round_bytes: -2 must be a whole number of bytes in [0, 1073741824]"},
  {MEM_AT, MEM_KEY("alloc_round_bytes", "0.5"), "device.alloc_round_bytes: 0.5 must be a whole number"},
  {MEM_AT, MEM_KEY("alloc_round_bytes", "2147483648"),
   "device.alloc_round_bytes: 2.14748e+09 must be a whole number of bytes in [0, 1073741824]"},
  {MEM_AT, MEM_KEY("alloc_small_bytes", "-1"), "device.alloc_small_bytes: -1 must be a whole number"},
  {MEM_AT, MEM_KEY("alloc_small_bytes", "true"), "device.alloc_small_bytes: needs"},
  {MEM_AT, MEM_KEY("alloc_small_round_bytes", "1e10"), "device.alloc_small_round_bytes: 1e+10 must be a whole number"},
  {MEM_AT, MEM_KEY("alloc_small_round_bytes", "NaN"), "not valid JSON"},
  {MEM_AT,
   "\"value\": 2e12, \"source\": \"s\"}, \"alloc_round_bytes\": {\"value\": 512, \"source\": \"s\"}, "
   "\"alloc_round_bytes\": {\"value\": 512, \"source\": \"s\"}}",
   "device.alloc_round_bytes: given twice"},
  /* syntax */
  {"\"host\"", "\"host\" \"host\"", ":18: not valid JSON"},
  {"}}}\n", "}}\n", "not valid JSON"},
};

static const char *write_profile(const char *name, const char *text) {
  static char path[128];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
  return path;
}

/* base with one replacement (the piece must occur exactly once). */
static char *mutate(const char *from, const char *to) {
  const char *at = strstr(base, from);
  if (!at || strstr(at + 1, from)) fail_msg("case piece '%s' is not unique in the base profile", from);
  size_t n = strlen(base) - strlen(from) + strlen(to) + 1;
  char *s = malloc(n);
  assert_non_null(s);
  snprintf(s, n, "%.*s%s%s", (int)(at - base), base, to, at + strlen(from));
  return s;
}

static void test_base_loads(void **st) {
  (void)st;
  static bs_profile p;
  char err[1024];
  const char *path = write_profile("base.json", base);
  if (bs_profile_load(path, &p, err, sizeof err)) fail_msg("the base profile does not load: %s", err);
  assert_true(p.kernel[BS_K_ATTN_FWD].kind == BS_KM_TABLE && p.link[BS_LINK_NVLINK].present);
  const bs_kernel_model *g = &p.kernel[BS_K_GEMM];
  assert_int_equal(g->kind, BS_KM_TILED);
  assert_true(g->peak_fraction == 0.75 && g->bw_efficiency == 0.95 && g->k_overhead == 16 && g->launch_s == 2e-6);
  assert_true(g->tile_m == 128 && g->tile_n == 256 && g->sms == 132);
  assert_int_equal(p.host_cores, 2);
}

/* The memory terms by hand: 512 B granules up to 1 MiB, 2 MiB above; the reserve comes off the capacity. */
static void test_memory_terms(void **st) {
  (void)st;
  static bs_profile p;
  char err[1024];
  const char *path = write_profile("plain.json", base);
  assert_int_equal(bs_profile_load(path, &p, err, sizeof err), 0);
  /* absent keys: every allocation exact, the whole memory usable */
  assert_int_equal(bs_profile_alloc_bytes(&p, 1), 1);
  assert_int_equal(bs_profile_alloc_bytes(&p, 3 << 20), 3 << 20);
  assert_int_equal(bs_profile_capacity_bytes(&p), 80000000000LL);
  char *text = mutate(MEM_AT,
                      "\"value\": 2e12, \"source\": \"s\"},"
                      " \"reserved_bytes\": {\"value\": 454140672, \"source\": \"s\"},"
                      " \"alloc_round_bytes\": {\"value\": 2097152, \"source\": \"s\"},"
                      " \"alloc_small_bytes\": {\"value\": 1048576, \"source\": \"s\"},"
                      " \"alloc_small_round_bytes\": {\"value\": 512, \"source\": \"s\"}}");
  path = write_profile("terms.json", text);
  free(text);
  if (bs_profile_load(path, &p, err, sizeof err)) fail_msg("%s", err);
  assert_int_equal(bs_profile_alloc_bytes(&p, 0), 0);
  assert_int_equal(bs_profile_alloc_bytes(&p, 1), 512);
  assert_int_equal(bs_profile_alloc_bytes(&p, 512), 512);
  assert_int_equal(bs_profile_alloc_bytes(&p, 513), 1024);
  assert_int_equal(bs_profile_alloc_bytes(&p, 1 << 20), 1 << 20);             /* the largest small request */
  assert_int_equal(bs_profile_alloc_bytes(&p, (1 << 20) + 1), 2 << 20);       /* large: one 2 MiB granule */
  assert_int_equal(bs_profile_alloc_bytes(&p, (4 << 20) + 512), 6 << 20);     /* 4 MiB + 512 B -> 6 MiB */
  assert_int_equal(bs_profile_alloc_bytes(&p, 64LL << 30), 64LL << 30);       /* whole granules stay */
  assert_int_equal(bs_profile_capacity_bytes(&p), 80000000000LL - 454140672); /* 79,545,859,328 */
}

static void test_bad_table(void **st) {
  (void)st;
  static bs_profile p;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *text = mutate(cases[i].from, cases[i].to);
    char name[32], err[1024] = "";
    snprintf(name, sizeof name, "bad%zu.json", i);
    const char *path = write_profile(name, text);
    int rc = bs_profile_load(path, &p, err, sizeof err);
    if (rc == 0) fail_msg("case %zu accepted: '%s' -> '%s'", i, cases[i].from, cases[i].to);
    if (!strstr(err, path)) fail_msg("case %zu: error '%s' does not name the file", i, err);
    if (!strstr(err, cases[i].needle)) fail_msg("case %zu: error '%s' lacks '%s'", i, err, cases[i].needle);
    free(text);
    unlink(path);
  }
}

static void test_unknown_and_empty(void **st) {
  (void)st;
  static bs_profile p;
  char err[1024];
  assert_int_equal(bs_profile_load("no-such-gpu", &p, err, sizeof err), -1);
  assert_non_null(strstr(err, "unknown profile 'no-such-gpu'"));
  char path[128];
  snprintf(path, sizeof path, "%s/missing.json", dir);
  assert_int_equal(bs_profile_load(path, &p, err, sizeof err), -1);
  assert_non_null(strstr(err, "missing.json: cannot open"));
  /* an empty file (the first crash fuzzing found: the error message read freed memory) */
  const char *e = write_profile("empty.json", "");
  assert_int_equal(bs_profile_load(e, &p, err, sizeof err), -1);
  assert_non_null(strstr(err, "empty.json"));
  assert_non_null(strstr(err, "not valid JSON"));
}

/* A directory or a FIFO named like a profile: an error at once (opening a FIFO would wait for a writer). */
static void test_not_regular(void **st) {
  (void)st;
  static bs_profile p;
  char err[1024], path[128];
  snprintf(path, sizeof path, "%s/dir.json", dir);
  assert_int_equal(mkdir(path, 0700), 0);
  assert_int_equal(bs_profile_load(path, &p, err, sizeof err), -1);
  assert_non_null(strstr(err, "dir.json: cannot read profile: not a regular file"));
  rmdir(path);
  snprintf(path, sizeof path, "%s/fifo.json", dir);
  assert_int_equal(mkfifo(path, 0600), 0);
  assert_int_equal(bs_profile_load(path, &p, err, sizeof err), -1);
  assert_non_null(strstr(err, "fifo.json: cannot read profile: not a regular file"));
  unlink(path);
}

int main(int argc, char **argv) {
  snprintf(dir, sizeof dir, "/tmp/bs_profile_input_XXXXXX");
  if (!mkdtemp(dir)) return 1;
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_base_loads),   cmocka_unit_test(test_not_regular),       cmocka_unit_test(test_bad_table),
    cmocka_unit_test(test_memory_terms), cmocka_unit_test(test_unknown_and_empty),
  };
  int rc = BS_RUN_NAMED(tests, argc, argv, NULL, NULL);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
  return rc;
}
