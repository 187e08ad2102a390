/*
 * fuzz_target.h — the entry point every fuzz target defines, called by libFuzzer
 * (scripts/fuzz.sh) or by replay.c over files (ctest).
 */
#ifndef BS_TESTS_FUZZ_TARGET_H
#define BS_TESTS_FUZZ_TARGET_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
