import java.sql.Connection

class UserRepo(private val conn: Connection, private val jdbc: JdbcTemplate) {
    fun find(id: String, name: String): Any {
        val st = conn.createStatement()
        // ruleid: kt-sql-injection
        val rs = st.executeQuery("SELECT * FROM users WHERE id = '$id'")
        val sql = "DELETE FROM users WHERE name = '" + name + "'"
        // ruleid: kt-sql-injection
        st.executeUpdate(sql)
        // ruleid: kt-sql-injection
        val rows = jdbc.queryForList("SELECT * FROM users WHERE name = '${name}'")
        // ok: kt-sql-injection
        val ps = conn.prepareStatement("SELECT * FROM users WHERE id = ?")
        ps.setString(1, id)
        // ok: kt-sql-injection
        val same = jdbc.queryForList("SELECT * FROM users WHERE name = ?", name)
        // ok: kt-sql-injection
        log.info("SELECT for $id")
        return listOf(rs, rows, same)
    }
}
