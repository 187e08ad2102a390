/*
 * cuda_module.c — see cuda_module.h: dlopen of burstsim_cuda.so next to
 * /proc/self/exe, and its three entry points by name.
 */
#include "cuda_module.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int bs_cuda_module_load(bs_cuda_module *m, char *err, size_t errlen) {
  memset(m, 0, sizeof *m);
#ifndef BURSTSIM_WITH_CUDA
  snprintf(err, errlen, "this build has no CUDA (configured without a CUDA toolkit and NCCL)");
  return -1;
#else
  char path[4096];
  ssize_t n = readlink("/proc/self/exe", path, sizeof path - 32);
  if (n <= 0) {
    snprintf(err, errlen, "this build has no CUDA here (cannot find the executable's directory)");
    return -1;
  }
  path[n] = 0;
  char *slash = strrchr(path, '/');
  snprintf(slash ? slash + 1 : path, 32, "burstsim_cuda.so");
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    snprintf(err, errlen, "this build has no CUDA module that loads (%s)", dlerror());
    return -1;
  }
  /* POSIX: a function pointer travels through dlsym's void * */
  *(void **)&m->open = dlsym(h, "bs_cuda_rt_open");
  *(void **)&m->close = dlsym(h, "bs_cuda_rt_close");
  *(void **)&m->device_count = dlsym(h, "bs_cuda_rt_device_count");
  if (!m->open || !m->close || !m->device_count) {
    snprintf(err, errlen, "this build has no CUDA module that loads (%s lacks its entry points)", path);
    memset(m, 0, sizeof *m);
    return -1;
  }
  return 0;
#endif
}
