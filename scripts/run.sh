#!/usr/bin/env bash
# Installs what is missing, builds, and opens `warmstart chat` on the embedded model
# (models/warmstart-chat.gguf, a small lfm2 model trained by tools/train/build_model.sh on
# synthetic conversations: tell it your name, a number, a city... and ask later; it is a
# functional test of reuse, not a general assistant). Each turn shows the tokens reused from the
# prefix cache, the tokens computed and the time to first token.
# Extra arguments go to `warmstart chat` (e.g. -m other.gguf, --temp 0.7).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh
exec ./build/warmstart chat "$@"
