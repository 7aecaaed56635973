#!/usr/bin/env bash
# Builds here what tools/gpu-check.sh runs on a GPU machine that cannot build onnxtrain (the device tool's
# H200: no oneDNN, protobuf, libonnx, Open MPI, GoogleTest there, and nothing can be fetched), and packs it:
#
#   .gpu-bundle/onnxtrain-gpu.tar.xz   bin/: onnxtrain and the CUDA-relevant test executables, stripped;
#                                      lib/: the shared libraries they need that the device image lacks
#                                      (oneDNN, protobuf, libonnx, Open MPI and its libs, libgomp, ...; not
#                                      glibc/libstdc++/libgcc_s, not the CUDA libraries, which the device has
#                                      through its CUDA toolkit and pip nvidia-* packages);
#                                      data/node/: the ONNX node tests onnx_conformance_test reads
#   .gpu-bundle/MANIFEST.txt           what was built (commit, dirty files), the paths compiled into the
#                                      tests, the CUDA libraries to find on the device, the archive's sha256
#   .gpu-data/fashion-mnist.tar.xz     Fashion-MNIST's IDX files (optional: too large to travel with
#                                      everything else in every call; the CNN epoch falls back to synthetic data)
#
#   tools/gpu-bundle.sh [BUILD_DIR]    # default build/gpu-bundle-build; ONNXTRAIN_JOBS (default 2)
#
# Both folders are git-ignored (.gitignore: /.gpu-*/) so the device tool carries them:
#   run(command="bash tools/gpu-check.sh --bundle .gpu-bundle", carry=[".gpu-bundle", ".gpu-data"], timeout_s=600)
# The test executables have the build's source folder and binary path compiled in (ONNXTRAIN_SOURCE_DIR,
# ONNXTRAIN_BINARY); MANIFEST.txt records them and gpu-check.sh recreates them on the device with links.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD
build=$(realpath -m "${1:-build/gpu-bundle-build}")
jobs="${ONNXTRAIN_JOBS:-2}"
bundle=$root/.gpu-bundle
data=$root/.gpu-data
archive=onnxtrain-gpu.tar.xz
say() { echo "gpu-bundle: $*"; }

# --- configure (once) and build -------------------------------------------------------------------------
if [[ ! -f $build/CMakeCache.txt ]] || ! grep -q '^ONNXTRAIN_CUDA:[A-Z]*=ON$' "$build/CMakeCache.txt"; then
  generator=()
  [[ -f $build/CMakeCache.txt ]] || ! command -v ninja >/dev/null || generator=(-G Ninja)
  say "configuring $build"
  cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DONNXTRAIN_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache >/dev/null
fi

# The tests that behave differently with a GPU: every test of the CUDA areas' cmake files, the op and
# conformance harnesses, and any other test whose source asks cuda::device_count().
tests=(gradient_harness_test onnx_conformance_test caching_allocator_test nccl_comm_test cuda_device_test)
for f in tests/cuda_tests.cmake tests/cuda_*_tests.cmake tests/nccl_tests.cmake; do
  [[ -f $f ]] && tests+=($(sed -n 's/^ *onnxtrain_add_test( *\([A-Za-z0-9_]*\).*/\1/p' "$f"))
done
for f in $(grep -l 'cuda::device_count' tests/*_test.cc); do tests+=("$(basename "$f" .cc)"); done
targets_help=$(cmake --build "$build" --target help 2>/dev/null)
selected=()
for t in $(printf '%s\n' "${tests[@]}" | sort -u); do
  if grep -qE "(^|[ /])$t(:|$)" <<<"$targets_help"; then selected+=("$t"); else say "(no target $t: skipped)"; fi
done
say "building onnxtrain ${selected[*]} (-j$jobs)"
cmake --build "$build" -j "$jobs" --target onnxtrain "${selected[@]}"

# --- stage: stripped executables, the libraries the device lacks, the node tests ------------------------
stage=$(mktemp -d /tmp/gpu-bundle.XXXXXX)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib" "$stage/data"
exes=("$build/tools/onnxtrain")
for t in "${selected[@]}"; do exes+=("$build/tests/$t"); done
for e in "${exes[@]}"; do strip -o "$stage/bin/$(basename "$e")" "$e"; done

# Left to the device: glibc, the GCC runtime, and the CUDA libraries (its toolkit / pip nvidia-* packages).
system_re='^(linux-vdso|ld-linux|libc|libm|libmvec|libpthread|librt|libdl|libstdc\+\+|libgcc_s)\.so'
cuda_re='^(libcuda|libcudart|libcublas|libcublasLt|libcudnn[a-z_]*|libnccl|libnvrtc|libnvidia-ml)\.so'
declare -A cuda_libs=()
missing=$(ldd "${exes[@]}" | grep 'not found' | sort -u || true)
[[ -z $missing ]] || { echo "$missing"; say "FAILED: libraries not found here"; exit 1; }
while read -r soname path; do
  if [[ $soname =~ $system_re ]]; then continue; fi
  if [[ $soname =~ $cuda_re ]]; then cuda_libs[$soname]=1; continue; fi
  [[ -f $stage/lib/$soname ]] || cp -L "$path" "$stage/lib/$soname"
done < <(ldd "${exes[@]}" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | sort -u)

# onnx_conformance_test reads its node tests from a fixed path (kNodeSuite); the bundle takes that folder.
node_suite=$(sed -n 's/.*kNodeSuite = "\(.*\)";.*/\1/p' tests/onnx_conformance_test.cc)
if [[ -n $node_suite && -d $node_suite ]]; then
  cp -r "$node_suite" "$stage/data/node"
else
  say "WARNING: no ONNX node tests at '$node_suite' (libonnx-testdata): onnx_conformance_test will fail there"
  node_suite=
fi

# --- manifest and archive --------------------------------------------------------------------------------
mkdir -p "$bundle"
rm -f "$bundle/$archive" "$bundle/MANIFEST.txt"
say "compressing (xz -9, one 256 MiB window so the executables' shared kernels compress once; ~2-3 min)"
tar -C "$stage" -cf - bin lib data | xz -T1 --lzma2=preset=9,dict=256MiB >"$bundle/$archive"
{
  echo "# tools/gpu-bundle.sh output, read by tools/gpu-check.sh --bundle (key=value)"
  echo "built=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "dirty_files=$(git status --porcelain 2>/dev/null | wc -l)"
  echo "cuda_archs=$(sed -n 's/^CMAKE_CUDA_ARCHITECTURES:[A-Z]*=//p' "$build/CMakeCache.txt")"
  echo "source_dir=$(sed -n 's/^CMAKE_HOME_DIRECTORY:[A-Z]*=//p' "$build/CMakeCache.txt")"
  echo "binary=$build/tools/onnxtrain"
  echo "node_suite=$node_suite"
  echo "tests=${selected[*]}"
  echo "cuda_libs=$(printf '%s\n' "${!cuda_libs[@]}" | sort | tr '\n' ' ' | sed 's/ $//')"
  echo "bundled_libs=$(ls "$stage/lib" | tr '\n' ' ' | sed 's/ $//')"
  echo "archive=$archive"
  echo "sha256=$(sha256sum "$bundle/$archive" | cut -d' ' -f1)"
} >"$bundle/MANIFEST.txt"

# Fashion-MNIST, recompressed with xz (26 MB instead of 30 MB of .gz), made once.
fmnist=/usr/share/datasets/fashion-mnist
if [[ -d $fmnist && ! -f $data/fashion-mnist.tar.xz ]]; then
  say "packing Fashion-MNIST into .gpu-data (once; ~1 min)"
  mkdir -p "$data" "$stage/fashion-mnist"
  for f in "$fmnist"/*-ubyte.gz; do gzip -dc "$f" >"$stage/fashion-mnist/$(basename "$f" .gz)"; done
  tar -C "$stage" -cf - fashion-mnist | xz -T1 -9 >"$data/fashion-mnist.tar.xz.part"
  mv "$data/fashion-mnist.tar.xz.part" "$data/fashion-mnist.tar.xz"
fi

# --- sizes against the device tool's 64 MiB per call (working tree + carried folders) -------------------
mib() { awk -v b="$1" 'BEGIN {printf "%.1f MiB", b / 1048576}'; }
bytes() { du -sb "$@" 2>/dev/null | awk '{s += $1} END {print s + 0}'; }
tree=$(git ls-files -z -co --exclude-standard | du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1)
b=$(bytes "$bundle"); d=$(bytes "$data")
say "$bundle: $(mib "$b") ($(du -sh "$stage/bin" | cut -f1) of executables, $(du -sh "$stage/lib" | cut -f1) of libraries, $(du -sh "$stage/data" | cut -f1) of node tests before xz)"
[[ -f $data/fashion-mnist.tar.xz ]] && say "$data: $(mib "$d")"
say "working tree that travels: $(mib "$tree"); with .gpu-bundle: $(mib $((tree + b))); with .gpu-data too: $(mib $((tree + b + d))) (limit 64 MiB a call)"
if ((tree + b + d > 62 * 1048576)); then
  say "carry .gpu-bundle alone (the CNN epoch then trains on synthetic data), or .gpu-data in a second call"
fi
{ git check-ignore -q .gpu-bundle/MANIFEST.txt && git check-ignore -q .gpu-data/x; } ||
  say "WARNING: .gpu-bundle or .gpu-data is not git-ignored (.gitignore: /.gpu-*/): it would travel twice"
cat "$bundle/MANIFEST.txt"
