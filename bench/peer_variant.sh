#!/usr/bin/env bash
# A copy of the speed peer (bench/peer) whose llama.cpp can load only one CPU variant of
# ggml, so that it runs the kernels it would run on an older CPU. ggml picks the
# best-scoring libggml-cpu-*.so beside the addon; the copy keeps VARIANT and the generic
# fallbacks (x64, sse42) and drops the rest. Never run in CI.
#
#   bench/peer_variant.sh haswell /tmp/peer-haswell   # AVX2 + FMA + F16C, no AVX-512
#   bench/compare.sh -P /tmp/peer-haswell ...         # with WARMSTART_ISA=avx2 for warmstart
set -euo pipefail
cd "$(dirname "$0")/.."
variant=${1:?usage: bench/peer_variant.sh VARIANT OUT_DIR}
out=${2:?usage: bench/peer_variant.sh VARIANT OUT_DIR}
src=bench/peer
[ -d "$src/node_modules/node-llama-cpp" ] || (cd "$src" && npm ci --no-audit --no-fund)
bins=node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
[ -f "$src/$bins/libggml-cpu-$variant.so" ] || { echo "no variant $variant in $src/$bins" >&2; exit 1; }
rm -rf "$out" && mkdir -p "$out/node_modules/@node-llama-cpp"
cp "$src/bench.mjs" "$src/package.json" "$out/"
# Everything but the prebuilt binaries of other platforms and GPUs.
for d in "$src"/node_modules/* "$src"/node_modules/.bin; do
  [ "$(basename "$d")" = @node-llama-cpp ] || cp -a "$d" "$out/node_modules/"
done
cp -a "$src/node_modules/@node-llama-cpp/linux-x64" "$out/node_modules/@node-llama-cpp/"
for so in "$out/$bins"/libggml-cpu-*.so; do
  case $(basename "$so") in
    "libggml-cpu-$variant.so" | libggml-cpu-x64.so | libggml-cpu-sse42.so) ;;
    *) rm "$so" ;;
  esac
done
ls "$out/$bins"
