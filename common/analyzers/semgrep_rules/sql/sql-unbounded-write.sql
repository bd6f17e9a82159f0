-- ruleid: sql-unbounded-write
DELETE FROM sessions;
-- ok: sql-unbounded-write
DELETE FROM sessions WHERE expires_at < now();
-- ruleid: sql-unbounded-write
UPDATE users SET active = false;
-- ok: sql-unbounded-write
UPDATE users SET active = false WHERE last_login < now() - interval '2 years';
