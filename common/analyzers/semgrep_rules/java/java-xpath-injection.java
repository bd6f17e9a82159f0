import javax.xml.xpath.XPath;
import javax.xml.xpath.XPathFactory;

class Lookup {
    String find(javax.servlet.http.HttpServletRequest req, Object doc) throws Exception {
        XPath xpath = XPathFactory.newInstance().newXPath();
        String user = req.getParameter("user");
        // ruleid: java-xpath-injection
        String role = xpath.evaluate("/users/user[@name='" + user + "']/role", doc);
        // ruleid: java-xpath-injection
        Object expr = xpath.compile(String.format("//order[customer='%s']", user));
        // ruleid: java-xpath-injection
        String x = XPathFactory.newInstance().newXPath().evaluate("//item[@sku='" + req.getParameter("sku") + "']", doc);
        // ok: java-xpath-injection
        String all = xpath.evaluate("/users/user[@active='true']/@name", doc);
        xpath.setXPathVariableResolver(name -> user);
        // ok: java-xpath-injection
        String bound = xpath.evaluate("/users/user[@name=$user]/role", doc);
        // ok: java-xpath-injection
        String byId = xpath.evaluate("//order[@id=" + Integer.parseInt(req.getParameter("id")) + "]", doc);
        return role + expr + x + all + bound + byId;
    }
}
