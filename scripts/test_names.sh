# shellcheck shell=bash
# Test selections by name for the CI lanes (scripts/sanitize.sh,
# scripts/test_under_load.sh), sourced.

# Exits unless each NAME (a ctest name prefix, a regular expression) still
# names a test of build folder DIR: a renamed test would otherwise leave a
# lane's selection quietly (or a whole selection empty: --no-tests).
#   require_tests DIR NAME...
require_tests() {
  local dir=$1 name
  shift
  for name in "$@"; do
    if ctest --test-dir "$dir" -N -R "^$name" | grep -q '^Total Tests: 0$'; then
      echo "${0##*/}: no test matches '^$name' (renamed? update scripts/${0##*/})" >&2 && exit 1
    fi
  done
}

# The names as one ctest regular expression: ^(NAME|NAME...).
#   names_regex NAME...
names_regex() {
  local IFS='|'
  echo "^($*)"
}
