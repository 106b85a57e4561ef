#!/bin/sh
# demo.sh — `make demo`: run a real program into an out-of-memory under the
# preload, with no code change, and read the bundle it leaves.  With a CUDA
# GPU and PyTorch, a PyTorch OOM; otherwise a C program under a 400 MB
# address-space limit.  $1 is the build directory.
set -u
build=$(cd "${1:-build}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d "${TMPDIR:-/tmp}/gmp-demo.XXXXXX")
export GMP_DUMP_DIR="$dir/oom_dumps" GMP_RUN_DIR="$dir/run" GMP_CONTEXT="make demo"
preload="$build/libgpumemprof_preload.so"

if python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    echo "== LD_PRELOAD=$preload python3 examples/torch_oom.py"
    LD_PRELOAD="$preload" python3 "$here/torch_oom.py"
else
    echo "== (ulimit -v 400000; LD_PRELOAD=$preload $build/examples/grow-heap)"
    (ulimit -v 400000; LD_PRELOAD="$preload" "$build/examples/grow-heap")
fi
echo "(exit status $?, the program's own)"
bundle=$(ls -d "$GMP_DUMP_DIR"/oom_dump_* 2>/dev/null | head -n 1)
if [ -z "$bundle" ]; then
    echo "demo: no bundle was written" >&2
    exit 1
fi
echo
echo "== gmp-inspect show $bundle"
"$build/gmp-inspect" show "$bundle"
echo
"$build/gmp-inspect" validate "$bundle"
echo "(the bundle stays in $dir)"
