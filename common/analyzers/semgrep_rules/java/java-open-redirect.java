class LoginServlet extends HttpServlet {
    void doGet(HttpServletRequest req, HttpServletResponse resp) throws Exception {
        // ruleid: java-open-redirect
        resp.sendRedirect(req.getParameter("next"));
        String target = req.getParameter("returnTo");
        // ruleid: java-open-redirect
        resp.sendRedirect(target);
        // ok: java-open-redirect
        resp.sendRedirect("/home");
    }
}
