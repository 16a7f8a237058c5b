#!/bin/sh
# Runs CMD as a site's wrapper script would (setting a binding or the
# environment) without exec: it waits for CMD and passes a stop (SIGTERM)
# on as exit code 143. For test_failure.cpp.
#   mpiexec -n N sh tests/helpers/trap_wrapper.sh CMD...
trap 'exit 143' TERM
"$@"
