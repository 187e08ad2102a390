/*
 * profile_attention.c — the profile's "attention_kernels" section (model.attention_kernel): the
 * per-pass rates of the fused attention kernels a job may choose (FlashAttention-2, FlashAttention-3,
 * cuDNN), read and checked beside the default's kernels.attn_fwd / attn_bwd, and the choice applied
 * to a loaded profile.
 */
#include "profile/profile.h"
#include "profile/profile_impl.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

/* "attention_kernels": {"default": {"value": "fa2", "source": ...}, "fa3": {"attn_fwd": {...},
 * "attn_bwd": {...}}, ...}: the rates of the fused attention kernels a job may choose
 * (model.attention_kernel); kernels.attn_fwd / attn_bwd are the default's. */
int bs_profile_parse_attention_kernels(const cJSON *aj, bs_profile *p, const char *path, char *err, size_t errlen) {
  if (!cJSON_IsObject(aj)) {
    snprintf(err, errlen, "%s: attention_kernels: not an object", path);
    return -1;
  }
  const cJSON *e;
  cJSON_ArrayForEach(e, aj) {
    int k = -1;
    for (int i = BS_ATTN_KERNEL_FA2; i < BS_ATTN_KERNEL_COUNT; i++)
      if (!strcmp(e->string, bs_attn_kernel_name((bs_attn_kernel)i))) k = i;
    if (!strcmp(e->string, "default")) {
      const cJSON *v = cJSON_GetObjectItemCaseSensitive(e, "value");
      for (int i = BS_ATTN_KERNEL_FA2; v && cJSON_IsString(v) && i < BS_ATTN_KERNEL_COUNT; i++)
        if (!strcmp(v->valuestring, bs_attn_kernel_name((bs_attn_kernel)i))) p->attn_default = (bs_attn_kernel)i;
      if (p->attn_default == BS_ATTN_KERNEL_DEFAULT || !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(e, "source"))) {
        snprintf(err, errlen, "%s: attention_kernels.default: {\"value\": fa2 | fa3 | cudnn, \"source\": ...} needed",
                 path);
        return -1;
      }
      continue;
    }
    if (k < 0) {
      snprintf(err, errlen, "%s: attention_kernels.%s: unknown kernel (default, fa2, fa3, cudnn)", path, e->string);
      return -1;
    }
    for (int pass = 0; pass < 2; pass++) {
      const char *kname = pass ? "attn_bwd" : "attn_fwd";
      const cJSON *kj = cJSON_GetObjectItemCaseSensitive(e, kname);
      char where[64];
      snprintf(where, sizeof where, "%s.%s", e->string, kname);
      if (!kj) {
        snprintf(err, errlen, "%s: attention_kernels.%s: missing", path, where);
        return -1;
      }
      if (bs_profile_parse_kernel(kj, where, &p->attn_rates[k][pass], path, err, errlen)) return -1;
      if (p->attn_rates[k][pass].kind != BS_KM_TABLE) {
        snprintf(err, errlen, "%s: attention_kernels.%s.model: must be 'table'", path, where);
        return -1;
      }
    }
    p->attn_have[k] = 1;
  }
  if (p->attn_default == BS_ATTN_KERNEL_DEFAULT) {
    snprintf(err, errlen, "%s: attention_kernels.default: missing (the kernel kernels.attn_fwd / attn_bwd hold)", path);
    return -1;
  }
  if (p->attn_have[p->attn_default]) {
    snprintf(err, errlen, "%s: attention_kernels.%s: the default's rates are kernels.attn_fwd / attn_bwd", path,
             bs_attn_kernel_name(p->attn_default));
    return -1;
  }
  p->attn_have[p->attn_default] = 1;
  p->attn_rates[p->attn_default][0] = p->kernel[BS_K_ATTN_FWD];
  p->attn_rates[p->attn_default][1] = p->kernel[BS_K_ATTN_BWD];
  return 0;
}

int bs_profile_use_attention(bs_profile *p, bs_attn_kernel k, char *err, size_t errlen) {
  if (k == BS_ATTN_KERNEL_DEFAULT) {
    if (p->attn_default == BS_ATTN_KERNEL_DEFAULT) return 0; /* no attention_kernels: as loaded */
    k = p->attn_default;
  }
  if (k < 0 || k >= BS_ATTN_KERNEL_COUNT || !p->attn_have[k]) {
    char held[64] = "";
    size_t n = 0;
    for (int i = BS_ATTN_KERNEL_FA2; i < BS_ATTN_KERNEL_COUNT; i++)
      if (p->attn_have[i] && n < sizeof held)
        n += (size_t)snprintf(held + n, sizeof held - n, "%s%s", n ? ", " : "", bs_attn_kernel_name((bs_attn_kernel)i));
    const char *why = k == BS_ATTN_KERNEL_FA3 ? " (FlashAttention-3 is written for Hopper, sm90)" : "";
    snprintf(err, errlen, "model.attention_kernel: profile %s holds no %s rates%s; it holds %s", p->name,
             bs_attn_kernel_name(k), why,
             n ? held : "only its default kernel's (kernels.attn_fwd / attn_bwd; no attention_kernels)");
    return -1;
  }
  p->kernel[BS_K_ATTN_FWD] = p->attn_rates[k][0];
  p->kernel[BS_K_ATTN_BWD] = p->attn_rates[k][1];
  return 0;
}
