#!/usr/bin/env bash
# Installs the Debian 12 packages warmstart needs to build and test (skips what is there).
set -euo pipefail
pkgs=(g++ cmake make pkg-config libpcre2-dev nlohmann-json3-dev libcli11-dev libgtest-dev
      clang-14 libfuzzer-14-dev python3-numpy libcpp-httplib-dev curl
      libpng-dev libjpeg62-turbo-dev
      libhiredis-dev redis-server haproxy)  # the Redis tier; the replica tests run Redis and HAProxy
# Node 20 + npm for tests/e2e (the official `openai` client). A node that is already
# installed (e.g. from NodeSource, whose package provides npm itself) is kept.
command -v node >/dev/null || pkgs+=(nodejs)
command -v npm >/dev/null || pkgs+=(npm)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# The pinned npm packages of the end-to-end tests (the npm registry must be reachable).
# (Debian 12's own nodejs is 18; the tests also run there, Node 20 is what CI uses.)
e2e="$(cd "$(dirname "$0")/.." && pwd)/tests/e2e"
if [ -f "$e2e/package-lock.json" ] && [ ! -d "$e2e/node_modules/openai" ]; then
  (cd "$e2e" && npm ci --no-audit --no-fund --loglevel=error)
fi
