using Microsoft.Data.SqlClient;

public class UserStore
{
    public object Find(SqlConnection conn, AppDb db, string id, string name)
    {
        // ruleid: cs-sql-injection
        var cmd = new SqlCommand("SELECT * FROM Users WHERE Id = '" + id + "'", conn);
        // ruleid: cs-sql-injection
        var users = db.Users.FromSqlRaw($"SELECT * FROM Users WHERE Name = '{name}'").ToList();
        var sql = string.Format("DELETE FROM Users WHERE Name = '{0}'", name);
        // ruleid: cs-sql-injection
        conn.Execute(sql);
        // ok: cs-sql-injection
        var safe = new SqlCommand("SELECT * FROM Users WHERE Id = @id", conn);
        safe.Parameters.AddWithValue("@id", id);
        // ok: cs-sql-injection
        var same = db.Users.FromSqlInterpolated($"SELECT * FROM Users WHERE Name = {name}").ToList();
        // ok: cs-sql-injection
        logger.LogInformation("SELECT for " + id);
        return users;
    }
}
