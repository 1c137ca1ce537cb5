#!/usr/bin/env bash
# The bash completion that `aisp completion bash` writes (CTest bash_completion; cmake/packaging.cmake):
# bash parses it, and TAB after given command lines offers what the CLI accepts. Run as:
#   bash check_completion.sh <path to aisp>
set -u
aisp="${1:?usage: check_completion.sh <path to aisp>}"
script="$(mktemp)"
trap 'rm -f "$script"' EXIT

"$aisp" completion bash > "$script" || { echo "FAIL: aisp completion bash exited $?"; exit 1; }
bash -n "$script" || { echo "FAIL: the script is not valid bash"; exit 1; }
# shellcheck source=/dev/null
source "$script"

failures=0
# complete LINE: runs _aisp as bash would with the cursor at the end of LINE; the offers in $offers.
complete_line() {
  COMP_LINE="$1"
  COMP_POINT=${#COMP_LINE}
  COMPREPLY=()
  _aisp
  offers=" ${COMPREPLY[*]} "
}
expect() {  # expect LINE WORD...: each WORD is offered
  local line="$1" w
  shift
  complete_line "$line"
  for w in "$@"; do
    if [[ "$offers" != *" $w "* ]]; then
      echo "FAIL: '$line<TAB>' does not offer '$w' (offers:$offers)"
      failures=$((failures + 1))
    fi
  done
}
refuse() {  # refuse LINE WORD...: no WORD is offered
  local line="$1" w
  shift
  complete_line "$line"
  for w in "$@"; do
    if [[ "$offers" == *" $w "* ]]; then
      echo "FAIL: '$line<TAB>' offers '$w'"
      failures=$((failures + 1))
    fi
  done
}

expect "aisp " bench hw tools doctor report history
refuse "aisp " __worker completion           # hidden commands stay hidden
expect "aisp b" bench
expect "aisp bench " run check compare list-targets
expect "aisp bench run --" --targets --axis --mode --update-expectations --chapters-dir
refuse "aisp bench run --" --chapter         # list-targets' option, not run's
expect "aisp bench list-targets --" --chapter --all --format
expect "aisp bench list-targets --all --" --format   # a flag takes no value: options still complete
expect "aisp --" --help --version
# Targets, one level at a time, also after a value option and inside a comma-separated list.
COMP_WORDBREAKS=$' \t\n"\'><=;|&(:'
expect "aisp bench run -t " ch07 ch10
refuse "aisp bench run -t " ch07:copy
expect "aisp bench run --mode cold -t ch0" ch07
expect "aisp bench run --targets ch07:" copy transpose    # bash keeps the part after ':'
expect "aisp bench run -t ch07:copy:0" 01_chunked 03_vectorized
expect "aisp bench check -t ch07:copy,ch1" copy,ch10
expect "aisp bench run --targets=ch07:co" copy
refuse "aisp bench run --label " ch07                 # only -t/--targets completes selectors

if ((failures > 0)); then
  echo "$failures completion check(s) failed"
  exit 1
fi
echo "bash completion ok: $(grep -c . "$script") lines, $(wc -w <<< "$_aisp_targets") target selectors"
