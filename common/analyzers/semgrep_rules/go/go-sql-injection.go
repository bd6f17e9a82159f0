package store

import (
	"context"
	"database/sql"
	"fmt"
)

func Find(ctx context.Context, db *sql.DB, id string, name string) error {
	// ruleid: go-sql-injection
	rows, err := db.Query(fmt.Sprintf("SELECT * FROM users WHERE id = '%s'", id))
	if err != nil {
		return err
	}
	defer rows.Close()
	// ruleid: go-sql-injection
	_, err = db.ExecContext(ctx, "DELETE FROM users WHERE name = '"+name+"'")
	q := fmt.Sprintf("UPDATE users SET name = '%s'", name)
	// ruleid: go-sql-injection
	_, err = db.Exec(q)
	// ok: go-sql-injection
	_, err = db.Exec("UPDATE users SET name = $1 WHERE id = $2", name, id)
	// ok: go-sql-injection
	label := fmt.Sprintf("user %s", name)
	// ok: go-sql-injection
	_ = cache.Get(label)
	return err
}
