/*
 * import_torchtitan.h — `burstsim import torchtitan CONFIG.toml`: a scenario from a torchtitan train
 * config (the TOML files of torchtitan/models/llama3/train_configs and their documented options).
 */
#ifndef BURSTSIM_IMPORT_TORCHTITAN_H
#define BURSTSIM_IMPORT_TORCHTITAN_H

#include <stddef.h>

#include "cmd_args.h"
#include "import_out.h"

/* Maps every setting of the TOML text into out (mapped, ignored with why, or refused). 0, or -1 with
 * a message in err when the text is not TOML this reader takes. */
int bs_import_torchtitan(const char *text, const bs_import_args *opt, bs_import_out *out, char *err, size_t errlen);

/* torchtitan's llama3 flavor of a burstsim model preset ("70B" for llama3.1-70b), or NULL. */
const char *bs_torchtitan_flavor(const char *preset);

#endif
