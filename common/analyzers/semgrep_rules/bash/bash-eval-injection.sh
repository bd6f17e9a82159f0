#!/bin/bash
# ruleid: bash-eval-injection
eval "$1"
# ruleid: bash-eval-injection
if [ -n "$CMD" ]; then eval ${CMD} --verbose; fi
# ok: bash-eval-injection
eval "$(ssh-agent -s)"
# ok: bash-eval-injection
echo "do not eval $1 here"
