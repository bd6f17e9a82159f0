#!/bin/sh
# ruleid: bash-curl-pipe-shell
curl -fsSL https://get.example.com | sh
# ruleid: bash-curl-pipe-shell
wget -qO- https://example.com/setup | sudo bash
# ok: bash-curl-pipe-shell
curl -fsSL https://get.example.com -o get.sh && sha256sum -c get.sh.sha256 && sh get.sh
# ruleid: bash-curl-pipe-shell
curl -fsSL https://deb.example.com/setup_20.x | sudo -E bash -
# ok: bash-curl-pipe-shell
curl -fsSL https://api.example.com/releases/latest | jq -r .tag_name
