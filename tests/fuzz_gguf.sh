#!/usr/bin/env bash
# Builds the GGUF reader's libFuzzer target (clang++-14, ASan + UBSan) and fuzzes it for a
# bounded time. Usage: tests/fuzz_gguf.sh <build_dir> <source_dir>
#   WS_FUZZ_SECONDS  run time in seconds (default 60)
#   WS_FUZZ_CXX      compiler (default clang++-14)
# Exits non-zero when the target cannot be built or the fuzzer finds a crash, a leak, a
# timeout or an exception other than GgufError; the crashing input is kept in
# <build_dir>/fuzz-artifacts/.
set -euo pipefail

build_dir=${1:?usage: fuzz_gguf.sh <build_dir> <source_dir>}
src_dir=${2:?usage: fuzz_gguf.sh <build_dir> <source_dir>}
mkdir -p "$build_dir"
build_dir=$(cd "$build_dir" && pwd)
src_dir=$(cd "$src_dir" && pwd)
seconds=${WS_FUZZ_SECONDS:-60}
cxx=${WS_FUZZ_CXX:-clang++-14}
max_len=65536

if ! command -v "$cxx" >/dev/null 2>&1; then
  echo "fuzz_gguf: $cxx not found. Install clang-14 and libfuzzer-14-dev (scripts/install-deps.sh does)." >&2
  exit 1
fi

bin=$build_dir/gguf_fuzz
sources=("$src_dir/fuzz/gguf_fuzz.cpp" "$src_dir/src/gguf/gguf.cpp" "$src_dir/src/tensor/dtype.cpp")
deps=("${sources[@]}" "$src_dir/src/gguf/gguf.h" "$src_dir/src/tensor/dtype.h" "$0")

# Rebuild only when a source, header or this script is newer than the binary.
stale=0
[ -x "$bin" ] || stale=1
for f in "${deps[@]}"; do
  [ "$f" -nt "$bin" ] && stale=1
done
if [ "$stale" = 1 ]; then
  echo "fuzz_gguf: building $bin"
  log=$build_dir/gguf_fuzz.build.log
  if ! "$cxx" -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
      -I "$src_dir/src" "${sources[@]}" -o "$bin.tmp" >"$log" 2>&1; then
    cat "$log" >&2
    if grep -q "clang_rt.fuzzer\|libFuzzer\|fsanitize=fuzzer" "$log"; then
      echo "fuzz_gguf: libFuzzer runtime missing. Install libfuzzer-14-dev (scripts/install-deps.sh does)." >&2
    fi
    echo "fuzz_gguf: build failed" >&2
    exit 1
  fi
  mv "$bin.tmp" "$bin"
fi

# Seeds: small hand-made files covering every value type and a few tensors, plus the
# heads of real fixtures (whole fixtures exceed max_len; their heads hold the real keys).
seeds=$build_dir/fuzz-seeds
corpus=$build_dir/fuzz-corpus
artifacts=$build_dir/fuzz-artifacts
mkdir -p "$seeds" "$corpus" "$artifacts"
fixtures=$src_dir/../shared/fixtures
for f in "$fixtures"/vocab/ggml-vocab-bert-bge.gguf "$fixtures"/models/llama-tiny-f32.gguf \
         "$fixtures"/models/mmproj-gemma3-tiny-f32.gguf "$fixtures"/models/llama-q256-q4_k_m.gguf; do
  [ -f "$f" ] || continue
  name=$(basename "$f" .gguf)
  for n in 1024 16384 $max_len; do
    [ -f "$seeds/$name-head$n" ] || head -c "$n" "$f" >"$seeds/$name-head$n"
  done
done
if command -v python3 >/dev/null 2>&1; then
  python3 - "$seeds" <<'PY'
import struct, sys, os
out = sys.argv[1]
def s(x): x = x.encode(); return struct.pack('<Q', len(x)) + x
def kv(k, t, payload): return s(k) + struct.pack('<I', t) + payload
def gguf(version, kvs, tensors, data, align=32):
    h = b'GGUF' + struct.pack('<IQQ', version, len(tensors), len(kvs)) + b''.join(kvs)
    for name, ne, dtype, off in tensors:
        h += s(name) + struct.pack('<I', len(ne)) + b''.join(struct.pack('<q', d) for d in ne)
        h += struct.pack('<IQ', dtype, off)
    h += b'\0' * (-len(h) % align)
    return h + data
types = [kv('general.architecture', 8, s('llama')), kv('a.u8', 0, b'\x07'), kv('a.i8', 1, b'\xff'),
         kv('a.u16', 2, struct.pack('<H', 9)), kv('a.i16', 3, struct.pack('<h', -9)),
         kv('a.u32', 4, struct.pack('<I', 64)), kv('a.i32', 5, struct.pack('<i', -1)),
         kv('a.f32', 6, struct.pack('<f', 0.5)), kv('a.bool', 7, b'\x01'),
         kv('a.u64', 10, struct.pack('<Q', 2**63)), kv('a.i64', 11, struct.pack('<q', -5)),
         kv('a.f64', 12, struct.pack('<d', 1e300)),
         kv('tokenizer.ggml.tokens', 9, struct.pack('<IQ', 8, 3) + s('a') + s('b') + s('<s>')),
         kv('tokenizer.ggml.token_type', 9, struct.pack('<IQ', 5, 3) + struct.pack('<3i', 1, 1, 3)),
         kv('a.nested', 9, struct.pack('<IQ', 9, 2) + struct.pack('<IQ', 0, 1) + b'\x01' + struct.pack('<IQ', 6, 0))]
tensors = [('token_embd.weight', [4, 3], 0, 0), ('q8', [32], 8, 64), ('q4k', [256, 1], 12, 128)]
data = bytes(64) + bytes(34) + bytes(30) + bytes(144)
seeds = {
    'all-types-v3': gguf(3, types, tensors, data),
    'all-types-v2': gguf(2, types, tensors, data),
    'align64': gguf(3, [kv('general.alignment', 4, struct.pack('<I', 64))], [('w', [16], 0, 64)], bytes(128), 64),
    'no-tensors': gguf(3, [kv('general.architecture', 8, s('x'))], [], b''),
}
for name, b in seeds.items():
    open(os.path.join(out, name + '.gguf'), 'wb').write(b)
PY
else
  echo "fuzz_gguf: python3 not found; fuzzing from fixture heads only" >&2
fi

echo "fuzz_gguf: fuzzing for ${seconds}s (corpus $corpus)"
log=$build_dir/gguf_fuzz.log
set +e
"$bin" -max_total_time="$seconds" -rss_limit_mb=2048 -max_len="$max_len" -timeout=10 \
  -print_final_stats=1 -artifact_prefix="$artifacts/" "$corpus" "$seeds" >"$log" 2>&1
rc=$?
set -e
grep -E "^(#[0-9]+ +DONE|stat::number_of_executed_units|stat::peak_rss_mb|stat::new_units_added)" "$log" || true
if [ "$rc" -ne 0 ]; then
  tail -n 60 "$log" >&2
  echo "fuzz_gguf: FAILED (exit $rc); full log $log, crashing input in $artifacts/" >&2
  exit 1
fi
echo "fuzz_gguf: no crash; log $log"
