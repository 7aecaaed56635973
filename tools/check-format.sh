#!/usr/bin/env bash
# Enforces the house format (.clang-format, clang-format 14 as Debian 12 ships it) on every tracked C++
# and CUDA file, except the files listed in tools/format-pending.txt: files that predate enforcement
# (2026-12-02). A listed file is formatted when it is next changed, and then leaves the list; a listed
# file that is already formatted fails the check too, so the list only shrinks.
#
#   tools/check-format.sh          # report, exit 1 on any difference (CI's first stage)
#   tools/check-format.sh --fix    # format the files that must be formatted, and prune the list
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
fix=false
case "${1:-}" in
  --fix) fix=true ;;
  "") ;;
  -h | --help) sed -n '2,9s/^# \{0,1\}//p' "$0"; exit 0 ;;
  *) echo "check-format.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
esac
formatter="$(command -v clang-format-14 || command -v clang-format || true)"
if [[ -z "$formatter" ]]; then
  echo "check-format.sh: clang-format is not installed (tools/install-deps.sh installs it)" >&2
  exit 1
fi
pending_list=tools/format-pending.txt
declare -A pending=()
while IFS= read -r line; do
  [[ -z "$line" || "$line" == \#* ]] || pending["$line"]=1
done < "$pending_list"

unformatted=() stale=()
while IFS= read -r file; do
  if "$formatter" --dry-run -Werror "$file" >/dev/null 2>&1; then
    [[ -n "${pending[$file]:-}" ]] && stale+=("$file")
  elif [[ -z "${pending[$file]:-}" ]]; then
    unformatted+=("$file")
  fi
done < <(git ls-files '*.cc' '*.h' '*.cu' '*.cuh')

if $fix; then
  for file in "${unformatted[@]}"; do "$formatter" -i "$file"; echo "formatted $file"; done
  for file in "${stale[@]}"; do
    grep -vxF "$file" "$pending_list" > "$pending_list.tmp" && mv "$pending_list.tmp" "$pending_list"
    echo "removed $file from $pending_list (it is formatted)"
  done
  exit 0
fi
status=0
if (( ${#unformatted[@]} )); then
  echo "check-format: ${#unformatted[@]} files differ from .clang-format (tools/check-format.sh --fix formats them):"
  printf '  %s\n' "${unformatted[@]}"
  status=1
fi
if (( ${#stale[@]} )); then
  echo "check-format: ${#stale[@]} files of $pending_list are formatted now: remove them from the list (--fix does):"
  printf '  %s\n' "${stale[@]}"
  status=1
fi
(( status == 0 )) && echo "check-format: every C++ and CUDA file is formatted (${#pending[@]} files still pending in $pending_list)"
exit $status
