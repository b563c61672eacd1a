# Sourced by _venv.sh: llama-cpp-python built for the machine's CPU class, never with -march=native.
#
# pip builds llama.cpp with -march=native by default, and its wheel cache then hands that wheel to every
# later install on the machine whatever CMAKE_ARGS says. A native build faults on machines whose CPU
# advertises AMX inside a VM that does not grant it (ldtilecfg in ggml_backend_amx_mul_mat), and one built
# on an AVX-512 host dies with SIGILL on an AVX2-only one. So the wheel is built here with explicit flags:
# the x86-64 baseline every machine of the fleet has (AVX2, FMA, F16C, BMI2), plus the AVX-512 extensions
# this CPU advertises (prefill 1.47x faster where it has them: bench/llama_builds.py), and never AMX. It is
# built without pip's cache, into a project-owned wheel directory named by the hash of the version and the
# flags, so a machine of another CPU class computes another key and builds its own. A venv records the key
# it installed; a different key (a venv moved to another CPU, or a wheel pip put there itself) is replaced.
LLAMA_VERSION="0.3.36"
# The instruction sets every build needs, as /proc/cpuinfo names them.
LLAMA_BASELINE_FLAGS="avx avx2 fma f16c bmi2"
LLAMA_BASELINE_CMAKE="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON \
-DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
# ggml's AVX-512 kernels need F, CD, VL, DQ and BW together; the rest are optional extensions.
LLAMA_AVX512_FLAGS="avx512f avx512cd avx512vl avx512dq avx512bw"

_cpu_has() {
  local flags=" $(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | cut -d: -f2) " flag
  for flag in "$@"; do
    [[ "$flags" == *" $flag "* ]] || return 1
  done
}

llama_cmake_args() {
  # RAG_LLAMA_CMAKE_ARGS overrides (another baseline, a GPU backend); it gets its own key and directory.
  if [ -n "${RAG_LLAMA_CMAKE_ARGS:-}" ]; then
    echo "$RAG_LLAMA_CMAKE_ARGS"
  elif [ "$(uname -m)" = x86_64 ]; then
    local args="$LLAMA_BASELINE_CMAKE"
    # RAG_LLAMA_PORTABLE=1: the baseline alone, for a wheel that must run on every machine of the fleet.
    if [ -z "${RAG_LLAMA_PORTABLE:-}" ] && _cpu_has $LLAMA_AVX512_FLAGS; then
      args="$args -DGGML_AVX512=ON"
      _cpu_has avx512vbmi && args="$args -DGGML_AVX512_VBMI=ON"
      _cpu_has avx512_vnni && args="$args -DGGML_AVX512_VNNI=ON"
      _cpu_has avx512_bf16 && args="$args -DGGML_AVX512_BF16=ON"
    else
      args="$args -DGGML_AVX512=OFF"
    fi
    echo "$args"
  else
    echo "-DGGML_NATIVE=OFF"  # other architectures: the compiler's generic baseline for the target
  fi
}

llama_build_key() {
  printf '%s\n%s\n' "$LLAMA_VERSION" "$(llama_cmake_args)" | sha256sum | cut -c1-16
}

llama_wheel_dir() {
  echo "${RAG_WHEEL_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/ragsite/wheels}/llama-cpp-python-$LLAMA_VERSION-$(llama_build_key)"
}

llama_check_cpu() {
  # The baseline's instruction sets must all be on this CPU, or the model process would die with SIGILL.
  [ "$(uname -m)" = x86_64 ] && [ -z "${RAG_LLAMA_CMAKE_ARGS:-}" ] || return 0
  local flag missing=()
  for flag in $LLAMA_BASELINE_FLAGS; do
    _cpu_has "$flag" || missing+=("$flag")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "This CPU lacks ${missing[*]}, which the llama.cpp build needs; set RAG_LLAMA_CMAKE_ARGS" \
      "(for example -DGGML_NATIVE=OFF -DGGML_AVX2=OFF) and run again." >&2
    return 1
  fi
}

llama_install() {
  local venv="$1" key dir wheel
  key=$(llama_build_key)
  dir=$(llama_wheel_dir)
  if [ "$(cat "$venv/.llama-build-key" 2>/dev/null)" = "$key" ] &&
    "$venv/bin/python" -c "import importlib.metadata as m; assert m.version('llama-cpp-python') == '$LLAMA_VERSION'" \
      2>/dev/null; then
    return 0
  fi
  llama_check_cpu || return 1
  wheel=$(ls "$dir"/llama_cpp_python-"$LLAMA_VERSION"-*.whl 2>/dev/null | head -1 || true)
  if [ -z "$wheel" ]; then
    echo "Building llama.cpp $LLAMA_VERSION for this CPU class, never -march=native (5-6 minutes on 2 cores): $dir"
    echo "  flags: $(llama_cmake_args)"
    mkdir -p "$dir.tmp"
    if ! CMAKE_ARGS="$(llama_cmake_args)" "$venv/bin/python" -m pip wheel --quiet --disable-pip-version-check \
      --no-cache-dir --no-binary llama-cpp-python --no-deps -w "$dir.tmp" "llama-cpp-python==$LLAMA_VERSION" \
      >"$venv/llama-build.log" 2>&1; then
      cat "$venv/llama-build.log" >&2
      echo "Building llama-cpp-python failed (log above, also in $venv/llama-build.log)." >&2
      return 1
    fi
    rm -rf "$dir" && mv "$dir.tmp" "$dir"
    wheel=$(ls "$dir"/llama_cpp_python-"$LLAMA_VERSION"-*.whl | head -1)
  fi
  # The wheel only ever comes from our directory; its dependencies (and the server extra's) from the index.
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps "$wheel" &&
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$wheel[server]" &&
    echo "$key" >"$venv/.llama-build-key"
}
