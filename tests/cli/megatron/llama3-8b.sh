#!/bin/bash
# A Megatron-LM launch of a LLaMA-3-8B-shaped model, written for burstsim's tests from the flags
# documented in megatron/training/arguments.py (not copied from a script).
GPUS_PER_NODE=8
NUM_NODES=4

DISTRIBUTED_ARGS=(
    --nproc_per_node $GPUS_PER_NODE
    --nnodes $NUM_NODES
)

MODEL_ARGS=(
    --num-layers 32
    --hidden-size 4096
    --ffn-hidden-size 14336
    --num-attention-heads 32
    --group-query-attention
    --num-query-groups 8
    --kv-channels 128
    --seq-length 32768
    --max-position-embeddings 32768
    --swiglu
    --untie-embeddings-and-output-weights
    --normalization RMSNorm
    --position-embedding-type rope
    --disable-bias-linear
)

TRAINING_ARGS=(
    --micro-batch-size 1
    --global-batch-size 16
    --lr 3.0e-4
    --min-lr 3.0e-5
    --lr-decay-style cosine
    --weight-decay 0.1
    --clip-grad 1.0
    --train-iters 1000
    --bf16
    --recompute-granularity selective
)

PARALLEL_ARGS=(
    --tensor-model-parallel-size 2
    --sequence-parallel
    --pipeline-model-parallel-size 2
    --context-parallel-size 4
    --cp-comm-type p2p
    --use-distributed-optimizer
)

DATA_ARGS=(
    --padded-vocab-size 128256
    --tokenizer-type HuggingFaceTokenizer
    --mock-data
)

torchrun ${DISTRIBUTED_ARGS[@]} pretrain_gpt.py \
    ${MODEL_ARGS[@]} \
    ${TRAINING_ARGS[@]} \
    ${PARALLEL_ARGS[@]} \
    ${DATA_ARGS[@]}
