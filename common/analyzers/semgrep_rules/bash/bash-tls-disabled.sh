#!/bin/bash
# ruleid: bash-tls-disabled
curl -sSk https://example.com/install -o install.sh
# ruleid: bash-tls-disabled
wget --no-check-certificate https://example.com/a.tgz
# ruleid: bash-tls-disabled
export NODE_TLS_REJECT_UNAUTHORIZED=0
# ok: bash-tls-disabled
curl -sSf --cacert ca.pem https://example.com/install -o install.sh
# ok: bash-tls-disabled
wget https://example.com/a.tgz
