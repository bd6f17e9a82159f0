CREATE FUNCTION find_user(name text) RETURNS SETOF users AS $$
BEGIN
  -- ruleid: sql-dynamic-sql-injection
  RETURN QUERY EXECUTE 'SELECT * FROM users WHERE name = ''' || name || '''';
END;
$$ LANGUAGE plpgsql;

CREATE FUNCTION purge(tbl text, cutoff text) RETURNS void AS $$
BEGIN
  -- ruleid: sql-dynamic-sql-injection
  EXECUTE format('DELETE FROM %I WHERE created_at < %s', tbl, cutoff);
  -- ok: sql-dynamic-sql-injection
  EXECUTE format('DELETE FROM %I WHERE created_at < $1', tbl) USING cutoff::date;
  -- ok: sql-dynamic-sql-injection
  EXECUTE 'ANALYZE ' || quote_ident(tbl);
  -- ok: sql-dynamic-sql-injection
  EXECUTE format('VACUUM %I', tbl);
END;
$$ LANGUAGE plpgsql;

CREATE PROCEDURE dbo.Search @term NVARCHAR(100) AS
BEGIN
  -- ruleid: sql-dynamic-sql-injection
  EXEC('SELECT * FROM dbo.Orders WHERE Note LIKE ''%' + @term + '%''');
  DECLARE @sql NVARCHAR(400);
  -- ruleid: sql-dynamic-sql-injection
  SET @sql = N'SELECT * FROM dbo.Orders WHERE Customer = ''' + @term + '''';
  -- ok: sql-dynamic-sql-injection
  EXEC sp_executesql N'SELECT * FROM dbo.Orders WHERE Customer = @c', N'@c NVARCHAR(100)', @c = @term;
  -- ok: sql-dynamic-sql-injection
  SET @msg = 'Searching for ' + @term;
END;

CREATE PROCEDURE by_status(IN p_status VARCHAR(20))
BEGIN
  -- ruleid: sql-dynamic-sql-injection
  SET @s = CONCAT('SELECT * FROM orders WHERE status = ''', p_status, '''');
  PREPARE stmt FROM @s;
  -- ok: sql-dynamic-sql-injection
  SET @t = 'SELECT * FROM orders WHERE status = ?';
  PREPARE stmt2 FROM @t;
  EXECUTE stmt2 USING @p_status;
END;
