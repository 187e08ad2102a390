/*
 * import_nemo.h — `burstsim import nemo CONFIG.yaml`: a NeMo training config (the Hydra YAML of
 * NeMo's Megatron GPT models and of the NeMo Framework Launcher's training configs, e.g.
 * conf/training/llama/llama3_8b.yaml) read as the Megatron-LM flags it stands for. NeMo's model.*
 * keys are Megatron's arguments by name (tensor_model_parallel_size is
 * --tensor-model-parallel-size), so the Megatron importer's one table maps them; this file only
 * translates, naming each key and its line on stderr as it does.
 */
#ifndef BURSTSIM_IMPORT_NEMO_H
#define BURSTSIM_IMPORT_NEMO_H

#include <stddef.h>

#include "import_out.h"
#include "megatron_flags.h"

/* The flags of the YAML text, in out (free with bs_mg_args_free); each translation is said in log.
 * 0, or -1 with "line N: ..." in err when the text is not YAML. */
int bs_nemo_args(const char *text, bs_mg_args *out, bs_import_out *log, char *err, size_t errlen);

#endif
