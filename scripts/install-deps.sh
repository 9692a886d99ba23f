#!/usr/bin/env bash
# Installs the Debian 12 packages warmstart needs to build and test (skips what is there).
set -euo pipefail
pkgs=(g++ cmake make pkg-config libpcre2-dev nlohmann-json3-dev libcli11-dev libgtest-dev
      clang-14 libfuzzer-14-dev python3-numpy)
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
