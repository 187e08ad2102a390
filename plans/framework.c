/*
 * framework.c — what workload.framework fixes: each framework's documented default for the keys
 * a user leaves out, and the mechanisms the workload plan takes from it (gradient-reduction
 * overlap, the FP8 amax reduction). The sources are cited at each choice; docs/frameworks.md
 * maps every framework's own options to the scenario keys.
 *
 * megatron (the default) sets no key and keeps what the plans model without a framework:
 * gradients reduced per layer, overlapped with the backward (Megatron-LM's DistributedDataParallel
 * with overlap_grad_reduce, megatron/core/distributed/distributed_data_parallel.py, as NeMo's
 * recipes set it in DistributedDataParallelConfig), tensor-parallel collectives not overlapped
 * (--tp-comm-overlap is off by default, megatron/training/arguments.py), the profile's default
 * attention kernel (Transformer Engine would pick cuDNN's fused attention on Hopper: set
 * model.attention_kernel = cudnn for that), and Transformer Engine's FP8 delayed scaling
 * (--fp8-recipe delayed by default), whose amaxes are all-reduced.
 */
#include "config.h"

const char *bs_framework_name(bs_framework f) {
  static const char *n[] = {"megatron", "torchtitan", "deepspeed"};
  return (f >= 0 && f < BS_FW_COUNT) ? n[f] : "?";
}

/*
 * model.attention_kernel = default:
 * - megatron: the profile's default (kept so that a scenario without the key predicts as before);
 * - torchtitan: PyTorch's scaled_dot_product_attention under sdpa_kernel with CUDNN_ATTENTION first
 *   and set_priority=True (torchtitan/models/attention.py, _init_sdpa_backend: "Always make CuDNN as
 *   the highest priority if available"), so cuDNN's fused attention where it takes the shape
 *   (bf16, head_dim <= 128 on H100);
 * - deepspeed: DeepSpeed runs the user's model, whose attention is a Hugging Face Transformers
 *   model's: attn_implementation = "flash_attention_2" (flash-attn 2.x), or "sdpa", whose default
 *   priority on H100 puts PyTorch's own FlashAttention-2 backend first (torch.nn.attention.SDPBackend
 *   order FLASH_ATTENTION, EFFICIENT_ATTENTION, MATH, CUDNN_ATTENTION): FA2 either way.
 */
bs_attn_kernel bs_framework_attn_kernel(bs_framework f) {
  switch (f) {
  case BS_FW_TORCHTITAN: return BS_ATTN_KERNEL_CUDNN;
  case BS_FW_DEEPSPEED: return BS_ATTN_KERNEL_FA2;
  default: return BS_ATTN_KERNEL_DEFAULT;
  }
}

/*
 * FP8 amax reduction. Transformer Engine's DelayedScaling recipe has reduce_amax = True by default:
 * "the amax value for FP8 tensors is reduced across the fp8_group (specified in the fp8_autocast
 * call)" (transformer_engine.common.recipe.DelayedScaling, TE's API docs). Megatron-LM's default
 * --fp8-recipe is delayed and its fp8_group is the amax-reduction group (parallel_state.
 * get_amax_reduction_group: the tp x cp x dp ranks of a pipeline stage). DeepSpeed has no FP8
 * recipe of its own: FP8 runs through Transformer Engine's modules and fp8_autocast, the same
 * reduction. torchtitan's FP8 is torchao's Float8Linear with tensorwise dynamic scaling (torchtitan
 * docs/float8.md): each scale comes from the tensor's own amax at the cast, no amax crosses ranks
 * (float8.precompute_float8_dynamic_scale_for_fsdp, which all-reduces the weights' amaxes once a
 * step, needs enable_fsdp_float8_all_gather, off by default).
 */
int bs_framework_amax_reduce(bs_framework f) { return f != BS_FW_TORCHTITAN; }

/*
 * Data-parallel gradient reduction overlapped with the backward (per layer, as the plan posts it),
 * or run in the backward's stream, each reduction waited as soon as it is posted:
 * - megatron: overlap_grad_reduce (above);
 * - torchtitan: FSDP2 reduce-scatters each block's gradients in its own stream as the block's
 *   backward ends (torch.distributed.fsdp.fully_shard, per TransformerBlock in torchtitan's
 *   parallelize.py apply_fsdp), overlapped;
 * - deepspeed: zero_optimization.overlap_comm is false by default except at stage 3
 *   (deepspeed/runtime/zero/config.py: overlap_comm None -> True for stage 3, else False; the
 *   DeepSpeed config-json docs): stage 0 all-reduces the gradients after the backward
 *   (engine.allreduce_gradients, buckets of allreduce_bucket_size) and stages 1-2 reduce each full
 *   bucket of reduce_bucket_size in the compute stream, both serialised with the compute.
 */
int bs_framework_grad_overlap(bs_framework f, int zero) { return f != BS_FW_DEEPSPEED || zero >= 3; }

/*
 * The keys a framework sets:
 * - torchtitan, training: parallel.zero = 3. torchtitan shards the parameters with FSDP2
 *   (parallelism.data_parallel_shard_degree = -1 by default: over every rank left after tp, pp and
 *   cp, cp included in the shard mesh), ZeRO-3-like: each block's weights all-gathered before its
 *   forward, resharded after it (reshard_after_forward), gathered again for its backward, the next
 *   block's gather prefetched one ahead, gradients reduce-scattered per block (plans/workload_zero.c,
 *   stage 3).
 * - model.attention_kernel = default: the framework's kernel (bs_framework_attn_kernel).
 * - torchtitan, training: parallel.method = allgather. torchtitan's context parallelism is torch's
 *   context_parallel (torch.distributed.tensor.experimental), whose rotate method is allgather unless
 *   parallelism.context_parallel_rotate_method says alltoall: K and V all-gathered over the group,
 *   the local queries attended against them. Its load balancer (_cp_options.enable_load_balance,
 *   on by default) cuts the sequence in 2 x cp chunks and gives rank r chunks r and 2 cp - 1 - r:
 *   parallel.layout = zigzag where no layout is given. Not applied where allgather does not run
 *   (MLA, packed documents, a balance layout given): the method stays the plans' default there.
 */
void bs_framework_defaults(bs_config *c, unsigned given) {
  bs_framework f = c->work.framework;
  c->work.framework_applied = 0;
  if (f == BS_FW_TORCHTITAN && !(given & BS_FW_KEY_ZERO) && c->work.phase == BS_TRAIN) {
    c->par.zero = 3;
    c->work.framework_applied |= BS_FW_KEY_ZERO;
  }
  int plain_layout = c->par.layout == BS_CONTIGUOUS || c->par.layout == BS_ZIGZAG || c->par.layout == BS_STRIPED;
  if (f == BS_FW_TORCHTITAN && !(given & BS_FW_KEY_METHOD) && c->work.phase == BS_TRAIN &&
      c->model.attention == BS_ATTENTION_MHA && c->work.docs == 0 && plain_layout) {
    c->par.method = BS_ALLGATHER;
    c->work.framework_applied |= BS_FW_KEY_METHOD;
    if (!(given & BS_FW_KEY_LAYOUT)) {
      c->par.layout = BS_ZIGZAG;
      c->work.framework_applied |= BS_FW_KEY_LAYOUT;
    }
  }
  bs_attn_kernel k = bs_framework_attn_kernel(f);
  if (c->model.attention_kernel == BS_ATTN_KERNEL_DEFAULT && k != BS_ATTN_KERNEL_DEFAULT) {
    c->model.attention_kernel = k;
    c->work.framework_applied |= BS_FW_KEY_KERNEL;
  }
}
