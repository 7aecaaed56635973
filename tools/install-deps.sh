#!/usr/bin/env bash
# Installs the Debian packages onnxtrain needs to build and test (apt-get only). Idempotent: when every
# package is already installed it changes nothing and needs no network. Runs as root, or through sudo.
#
#   tools/install-deps.sh              # build + test dependencies
#   tools/install-deps.sh --fixtures   # also Debian's PyTorch, torchvision and ONNX for models/make_fixtures.py and models/zoo/make_zoo.py
#   tools/install-deps.sh --plots      # (accepted as before: matplotlib is installed by default)
#   tools/install-deps.sh --yes        # never ask (also implied by CI=true or no terminal on stdin)
#   tools/install-deps.sh --list       # print the package list and exit
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config
  libonnx-dev libprotobuf-dev protobuf-compiler libjpeg62-turbo-dev libpng-dev
  libdnnl-dev
  libopenmpi-dev openmpi-bin
  libgtest-dev libgmock-dev libbenchmark-dev
  nlohmann-json3-dev libcli11-dev zlib1g-dev
  dataset-fashion-mnist libonnx-testdata
  clang-format  # tools/check-format.sh (clang-format 14 on Debian 12)
  clang-14 libclang-rt-14-dev  # the fuzz preset: clang++-14 and libFuzzer (libclang_rt.fuzzer), tools/run-fuzzers.sh
  python3 python3-venv
  python3-matplotlib  # tools/plot_metrics.py and tools/plot_bench.py (plot_metrics_test runs the first)
)
# Only for regenerating the ONNX fixtures in models/; never needed to build or test.
fixture_packages=(python3-torch python3-torchvision python3-onnx)

assume_yes=false
list_only=false
[[ "${CI:-}" == "true" || ! -t 0 ]] && assume_yes=true
for arg in "$@"; do
  case "$arg" in
    --fixtures) packages+=("${fixture_packages[@]}") ;;
    --plots) ;;  # matplotlib is a default package now
    --yes | -y) assume_yes=true ;;
    --list) list_only=true ;;
    -h | --help) sed -n '2,10s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) echo "install-deps.sh: unknown option '$arg' (try --help)" >&2; exit 2 ;;
  esac
done
if $list_only; then
  printf '%s\n' "${packages[@]}"
  exit 0
fi

missing_packages() {
  local p
  for p in "${packages[@]}"; do
    if [[ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)" != "install ok installed" ]]; then
      echo "$p"
    fi
  done
}

mapfile -t missing < <(missing_packages)
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-deps: all ${#packages[@]} packages already installed"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"

if [[ $(id -u) -eq 0 ]]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1; then
  as_root=(sudo)
  $assume_yes && as_root=(sudo -n)  # never wait for a password nobody can type
else
  echo "install-deps: not root and no sudo; as root run: apt-get install ${missing[*]}" >&2
  exit 1
fi

apt_flags=()
if $assume_yes; then
  apt_flags=(-y -q)
  as_root+=(env DEBIAN_FRONTEND=noninteractive)
fi
"${as_root[@]}" apt-get update -q
"${as_root[@]}" apt-get install "${apt_flags[@]}" "${missing[@]}"

mapfile -t still_missing < <(missing_packages)
if [[ ${#still_missing[@]} -ne 0 ]]; then
  echo "install-deps: still missing after apt-get install: ${still_missing[*]}" >&2
  exit 1
fi
echo "install-deps: done"
