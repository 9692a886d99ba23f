#!/usr/bin/env bash
# Builds and runs the sanitizer test binaries of fuzz/CMakeLists.txt with clang:
#   address: ws_san_tests (ASan + UBSan) in <build_dir>/fuzz, the tree tests/fuzz.sh uses:
#            the unit tests of snapshot memory, request limits (prompt length guard over
#            every fixture vocabulary, image pixel budget) and the connection layer. The
#            parsers themselves run under the same sanitizers in tests/fuzz.sh.
#   thread:  ws_tsan_tests (TSan) in <build_dir>/tsan: the connection layer under
#            concurrent clients.
# Usage: tests/sanitize.sh <build_dir> <source_dir> address|thread
#   WS_FUZZ_CXX   compiler (default clang++-14);  WS_FUZZ_JOBS  compile jobs (default 2)
set -euo pipefail

usage="usage: sanitize.sh <build_dir> <source_dir> address|thread"
build_dir=$(cd "${1:?$usage}" && pwd)
src_dir=$(cd "${2:?$usage}" && pwd)
mode=${3:?$usage}
cxx=${WS_FUZZ_CXX:-clang++-14}
jobs=${WS_FUZZ_JOBS:-2}
case "$mode" in
  address) tree=$build_dir/fuzz; bin=ws_san_tests ;;
  thread) tree=$build_dir/tsan; bin=ws_tsan_tests ;;
  *) echo "$usage" >&2; exit 2 ;;
esac
command -v "$cxx" >/dev/null 2>&1 || { echo "sanitize: $cxx not found (scripts/install-deps.sh installs clang-14)" >&2; exit 1; }
mkdir -p "$tree"

(
  flock 9
  if [ ! -f "$tree/CMakeCache.txt" ]; then
    cmake -S "$src_dir/fuzz" -B "$tree" -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE= -DWS_SAN_MODE="$mode" \
      -DWS_MAIN_BINARY="$build_dir/warmstart" >"$tree/configure.log" 2>&1 ||
      { cat "$tree/configure.log" >&2; echo "sanitize: configure failed" >&2; exit 1; }
  fi
  if ! cmake --build "$tree" --target "$bin" -j"$jobs" >"$tree/build-$bin.log" 2>&1; then
    tail -n 80 "$tree/build-$bin.log" >&2
    echo "sanitize: build of $bin failed" >&2
    exit 1
  fi
) 9>"$tree/.build.lock"

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:suppressions=$src_dir/fuzz/support/tsan.supp}
echo "sanitize[$mode]: running $bin"
exec "$tree/$bin"
