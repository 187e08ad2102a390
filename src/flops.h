/*
 * flops.h — the model FLOPs of one step of a point, the convention the throughput
 * figures (throughput.* in the result) are held to, so that a prediction reads like
 * a training log's MFU. src/flops.c states the formula.
 */
#ifndef BURSTSIM_FLOPS_H
#define BURSTSIM_FLOPS_H

#include <stdint.h>
#include "plans/config.h"

/* Tokens one step processes, over all GPUs: batch x seq_len (train, prefill; less the
 * cached_tokens of a prefill against a KV cache) or batch x decode_tokens (decode). */
double bs_step_tokens(const bs_config *c);
/* Model FLOPs of one step of the point's scope, over all GPUs (recomputation not
 * counted; train = 3 x forward); NaN when the shape is not known (hidden, ffn or
 * vocab unset where the scope needs them). */
double bs_step_model_flops(const bs_config *c);

#endif
