#!/bin/bash
# ruleid: bash-sql-injection
mysql -u app -e "DELETE FROM users WHERE name = '$1'"
# ruleid: bash-sql-injection
psql "$DB" -c "select * from users where id = ${USER_ID}"
# ok: bash-sql-injection
psql "$DB" -v id="$USER_ID" -c 'select * from users where id = :id'
