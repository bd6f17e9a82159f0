#!/bin/bash
db=$1
# ruleid: bash-shell-c-injection
bash -c "pg_dump $db > /var/backups/latest.sql"
# ruleid: bash-shell-c-injection
sudo sh -e -c "rm -rf ${TARGET}/cache"
# ruleid: bash-shell-c-injection
sh -c $CMD
# ok: bash-shell-c-injection
sh -c 'pg_dump "$1" > /var/backups/latest.sql' _ "$db"
# ok: bash-shell-c-injection
bash -c "make clean"
# ok: bash-shell-c-injection
echo "run bash -c later"
