export function login(req: any, res: any) {
  if (req.query.done) {
    // ruleid: js-open-redirect
    return res.redirect(req.query.next);
  }
  // ruleid: js-open-redirect
  res.redirect(302, req.body.returnTo);
  // ok: js-open-redirect
  res.redirect("/home");
  // ok: js-open-redirect
  res.redirect(`/users/${req.user.id}`);
}
