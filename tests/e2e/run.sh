#!/usr/bin/env bash
# ctest entry point: installs the pinned npm packages (openai, the AI SDK) if scripts/install-deps.sh has
# not, then runs the node:test suite against a server it starts from WS_BINARY.
# usage: tests/e2e/run.sh WARMSTART_BINARY MODEL.gguf
set -euo pipefail
cd "$(dirname "$0")"
if [ ! -d node_modules/openai ] || [ ! -d node_modules/ai ]; then
  if [ -f package-lock.json ]; then npm ci --no-audit --no-fund --loglevel=error
  else npm install --no-audit --no-fund --loglevel=error; fi
fi
WS_BINARY="$1" WS_MODEL="$2" exec node --test openai.test.mjs tools.test.mjs
