#!/bin/sh
# mpirun with a TMPDIR of its own under the build tree (first argument): Open MPI creates its session
# directory under TMPDIR, and two jobs that start at the same moment (ctest -j) can race creating the
# shared one and fail with "File exists". exec keeps signals and timeouts aimed at mpirun itself.
base=$1
shift
mkdir -p "$base" || exit 1
d=$(mktemp -d "$base/job.XXXXXX") || exit 1
TMPDIR=$d
export TMPDIR
exec "$@"
