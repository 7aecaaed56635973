#!/usr/bin/env bash
# Enforces the house format (.clang-format, clang-format 14 as Debian 12 ships it) on every tracked C++
# and CUDA file.
#
#   tools/check-format.sh          # report, exit 1 on any difference (CI's first stage)
#   tools/check-format.sh --fix    # format the files that differ
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
fix=false
case "${1:-}" in
  --fix) fix=true ;;
  "") ;;
  -h | --help) sed -n '2,6s/^# \{0,1\}//p' "$0"; exit 0 ;;
  *) echo "check-format.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
esac
formatter="$(command -v clang-format-14 || command -v clang-format || true)"
if [[ -z "$formatter" ]]; then
  echo "check-format.sh: clang-format is not installed (tools/install-deps.sh installs it)" >&2
  exit 1
fi

unformatted=()
while IFS= read -r file; do
  "$formatter" --dry-run -Werror "$file" >/dev/null 2>&1 || unformatted+=("$file")
done < <(git ls-files '*.cc' '*.h' '*.cu' '*.cuh')

if $fix; then
  for file in "${unformatted[@]}"; do "$formatter" -i "$file"; echo "formatted $file"; done
  exit 0
fi
if (( ${#unformatted[@]} )); then
  echo "check-format: ${#unformatted[@]} files differ from .clang-format (tools/check-format.sh --fix formats them):"
  printf '  %s\n' "${unformatted[@]}"
  exit 1
fi
echo "check-format: every C++ and CUDA file is formatted"
