-- ruleid: sql-hardcoded-password
CREATE ROLE app LOGIN PASSWORD 'Winter2024!';
-- ruleid: sql-hardcoded-password
CREATE USER 'report'@'%' IDENTIFIED BY 'hunter22';
-- ok: sql-hardcoded-password
CREATE ROLE reporting NOLOGIN;
-- ok: sql-hardcoded-password
ALTER ROLE app PASSWORD NULL;
