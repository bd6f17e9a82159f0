package web

import "net/http"

func Login(w http.ResponseWriter, r *http.Request) {
	if r.Method == "GET" {
		// ruleid: go-open-redirect
		http.Redirect(w, r, r.URL.Query().Get("next"), http.StatusFound)
		return
	}
	target := r.FormValue("return_to")
	// ruleid: go-open-redirect
	http.Redirect(w, r, target, http.StatusSeeOther)
	// ok: go-open-redirect
	http.Redirect(w, r, "/home", http.StatusFound)
}
