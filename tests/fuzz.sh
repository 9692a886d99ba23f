#!/usr/bin/env bash
# Builds one libFuzzer target of fuzz/ (clang++-14, ASan + UBSan; the fuzz/CMakeLists.txt
# project in <build_dir>/fuzz) and fuzzes it for a bounded time, starting from the
# committed regression corpus fuzz/corpus/<target>/ plus seeds taken from the fixtures.
# Usage: tests/fuzz.sh <build_dir> <source_dir> <target> [seconds]
#   targets: gguf tokenizer chat_template openai_request image snapshot tier_record
#   WS_FUZZ_SECONDS  run time (overrides the argument; default 15)
#   WS_FUZZ_CXX      compiler (default clang++-14)
#   WS_FUZZ_JOBS     parallel compile jobs (default 2)
# Exits non-zero when the target cannot be built or the fuzzer finds a crash, a leak, a
# timeout or an unexpected exception; the crashing input is kept in
# <build_dir>/fuzz/artifacts-<target>/. Fix the bug, then add that file to
# fuzz/corpus/<target>/ so that every later run replays it.
set -euo pipefail

usage="usage: fuzz.sh <build_dir> <source_dir> <target> [seconds]"
build_dir=${1:?$usage}
src_dir=${2:?$usage}
target=${3:?$usage}
seconds=${WS_FUZZ_SECONDS:-${4:-15}}
cxx=${WS_FUZZ_CXX:-clang++-14}
jobs=${WS_FUZZ_JOBS:-2}
mkdir -p "$build_dir/fuzz"
fuzz_dir=$(cd "$build_dir/fuzz" && pwd)
src_dir=$(cd "$src_dir" && pwd)
fixtures=$src_dir/../shared/fixtures
say() { echo "fuzz[$target]: $*"; }

[ -f "$src_dir/fuzz/${target}_fuzz.cpp" ] || { echo "$usage (no fuzz/${target}_fuzz.cpp)" >&2; exit 2; }
if ! command -v "$cxx" >/dev/null 2>&1; then
  echo "fuzz: $cxx not found. Install clang-14 and libfuzzer-14-dev (scripts/install-deps.sh does)." >&2
  exit 1
fi

# Per-target input size bound and fixture seeds (files copied whole, or their heads).
max_len=16384
seed_globs=()
case "$target" in
  gguf) max_len=65536 ;;
  tokenizer) seed_globs=("$fixtures/vocab/*.inp") ;;
  chat_template) max_len=32768; seed_globs=("$fixtures/templates/*.jinja") ;;
  openai_request) max_len=32768 ;;
  image) max_len=65536; seed_globs=("$fixtures/images/*.png") ;;
  snapshot) max_len=512 ;;
  tier_record) max_len=256 ;;
esac

# One build tree for all targets; ctest may run several targets at once, so serialise it.
bin=$fuzz_dir/${target}_fuzz
(
  flock 9
  if [ ! -f "$fuzz_dir/CMakeCache.txt" ]; then
    say "configuring $fuzz_dir"
    cmake -S "$src_dir/fuzz" -B "$fuzz_dir" -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE= \
      -DWS_MAIN_BINARY="$(cd "$build_dir" && pwd)/warmstart" >"$fuzz_dir/configure.log" 2>&1 ||
      { cat "$fuzz_dir/configure.log" >&2; echo "fuzz: configure failed" >&2; exit 1; }
  fi
  if ! cmake --build "$fuzz_dir" --target "${target}_fuzz" -j"$jobs" >"$fuzz_dir/build-$target.log" 2>&1; then
    tail -n 80 "$fuzz_dir/build-$target.log" >&2
    grep -q "clang_rt.fuzzer\|libFuzzer" "$fuzz_dir/build-$target.log" &&
      echo "fuzz: libFuzzer runtime missing. Install libfuzzer-14-dev (scripts/install-deps.sh does)." >&2
    echo "fuzz: build of ${target}_fuzz failed" >&2
    exit 1
  fi
) 9>"$fuzz_dir/.build.lock"

seeds=$fuzz_dir/seeds-$target
corpus=$fuzz_dir/corpus-$target
artifacts=$fuzz_dir/artifacts-$target
mkdir -p "$seeds" "$corpus" "$artifacts"
for pattern in "${seed_globs[@]}"; do
  for f in $pattern; do
    [ -f "$f" ] && head -c "$max_len" "$f" >"$seeds/$(basename "$f")"
  done
done
if [ "$target" = gguf ]; then  # real files are larger than max_len; their heads hold the real keys
  for f in "$fixtures"/vocab/ggml-vocab-bert-bge.gguf "$fixtures"/models/llama-tiny-f32.gguf \
           "$fixtures"/models/mmproj-gemma3-tiny-f32.gguf "$fixtures"/models/llama-q256-q4_k_m.gguf; do
    [ -f "$f" ] || continue
    for n in 1024 16384 $max_len; do head -c "$n" "$f" >"$seeds/$(basename "$f" .gguf)-head$n"; done
  done
fi
dirs=("$corpus" "$seeds")
[ -d "$src_dir/fuzz/corpus/$target" ] && dirs+=("$src_dir/fuzz/corpus/$target")
dict=()
[ -f "$src_dir/fuzz/$target.dict" ] && dict=(-dict="$src_dir/fuzz/$target.dict")

say "fuzzing for ${seconds}s"
log=$fuzz_dir/$target.log
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
set +e
"$bin" -max_total_time="$seconds" -rss_limit_mb=2048 -max_len="$max_len" -timeout=10 "${dict[@]}" \
  -print_final_stats=1 -artifact_prefix="$artifacts/" "${dirs[@]}" >"$log" 2>&1
rc=$?
set -e
grep -E "^(#[0-9]+ +DONE|stat::number_of_executed_units|stat::peak_rss_mb|stat::new_units_added)" "$log" || true
if [ "$rc" -ne 0 ]; then
  tail -n 60 "$log" >&2
  echo "fuzz[$target]: FAILED (exit $rc); full log $log, crashing input in $artifacts/" >&2
  exit 1
fi
say "no crash; log $log"
