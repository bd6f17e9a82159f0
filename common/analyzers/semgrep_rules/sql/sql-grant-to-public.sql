-- ruleid: sql-grant-to-public
GRANT SELECT, INSERT ON users TO PUBLIC;
-- ruleid: sql-grant-to-public
GRANT ALL PRIVILEGES ON DATABASE shop TO app;
-- ok: sql-grant-to-public
GRANT SELECT ON orders TO reporting;
-- ok: sql-grant-to-public
REVOKE ALL ON users FROM PUBLIC;
