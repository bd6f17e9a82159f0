import java.sql.*;

class Users {
    ResultSet find(Connection conn, String id, String name) throws SQLException {
        Statement st = conn.createStatement();
        // ruleid: java-sql-injection
        ResultSet rs = st.executeQuery("SELECT * FROM users WHERE id = '" + id + "'");
        String sql = String.format("DELETE FROM users WHERE name = '%s'", name);
        // ruleid: java-sql-injection
        st.executeUpdate(sql);
        // ok: java-sql-injection
        PreparedStatement ps = conn.prepareStatement("SELECT * FROM users WHERE id = ?");
        ps.setString(1, id);
        // ok: java-sql-injection
        log.info("looked up " + id);
        return rs;
    }
}
