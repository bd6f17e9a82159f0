export async function find(db: any, id: string, name: string) {
  // ruleid: js-sql-injection
  const rows = await db.query(`select * from users where id = ${id}`);
  // ruleid: js-sql-injection
  db.execute("DELETE FROM users WHERE name = '" + name + "'");
  const sql = `update users set name = '${name}' where id = 1`;
  // ruleid: js-sql-injection
  await db.query(sql);
  // ok: js-sql-injection
  await db.query("select * from users where id = $1", [id]);
  // ok: js-sql-injection
  await db.query(`select * from users where id = 1`);
  // ok: js-sql-injection
  const got = cache.get(`user:${id}`);
  return [rows, got];
}
