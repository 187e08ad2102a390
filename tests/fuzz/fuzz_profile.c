/*
 * fuzz_profile.c — libFuzzer target for the profile loader: any bytes as a
 * profile JSON file must give either a profile whose every number is finite
 * and usable, or an error naming the file, never a crash, a leak or undefined
 * behaviour. An accepted profile is also asked for kernel times over a few
 * shapes (each must be finite and >= 0, or an error with a message) and saved
 * and reloaded (the round trip must load). Built and run by scripts/fuzz.sh.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "profile/profile.h"
#include "tests/fuzz/fuzz_target.h"

static void check_times(const bs_profile *p) {
  static const int64_t lens[] = {1, 512, 4096, 1 << 20};
  for (int k = 0; k < BS_K_COUNT; k++)
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
      bs_compute c;
      memset(&c, 0, sizeof c);
      c.kernel = (bs_kernel)k;
      c.a.B = 1;
      c.a.Zq = 8;
      c.a.Nq = lens[i];
      c.a.Nk = lens[i];
      c.a.d = 128;
      c.m = c.n = c.k = lens[i];
      c.elems = lens[i];
      c.flops = 4.0 * 8 * (double)lens[i] * (double)lens[i] * 128 * (i & 1 ? 0.5 : 1.0);
      char err[256] = "";
      double t = bs_profile_kernel_time(p, &c, i & 1 ? BS_FP32 : BS_BF16, err, sizeof err);
      if (t == -1 && p->kernel[k].kind == BS_KM_NONE && err[0]) continue;
      if (!(t >= 0) || isinf(t)) {
        fprintf(stderr, "kernel %d at %lld: time %g\n", k, (long long)lens[i], t);
        abort();
      }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static char path[64], saved[64];
  if (!path[0]) {
    snprintf(path, sizeof path, "/tmp/bs_fuzz_profile.%ld.json", (long)getpid());
    snprintf(saved, sizeof saved, "/tmp/bs_fuzz_profile_saved.%ld.json", (long)getpid());
  }
  FILE *f = fopen(path, "wb");
  if (!f) return 0;
  fwrite(data, 1, size, f);
  fclose(f);
  static bs_profile p, q;
  char err[1024] = "";
  if (bs_profile_load(path, &p, err, sizeof err)) {
    if (!strstr(err, path)) abort(); /* an error must name the file */
    return 0;
  }
  check_times(&p);
  bs_topo_params tp;
  if (bs_topo_defaults("dgx-a100", 2, &tp, err, sizeof err)) abort();
  bs_profile_apply_topo(&p, &tp);
  if (bs_topo_check(&tp, err, sizeof err) == 0) free(bs_topo_xml(&tp, err, sizeof err));
  if (bs_profile_save(&p, saved, "fuzz", err, sizeof err) == 0 && bs_profile_load(saved, &q, err, sizeof err)) {
    fprintf(stderr, "saved profile does not load back: %s\n", err);
    abort();
  }
  unlink(saved);
  return 0;
}
