package run

import (
	"net/http"
	"os/exec"
)

func Handler(w http.ResponseWriter, r *http.Request) {
	dir := r.URL.Query().Get("dir")
	// ruleid: go-command-injection
	out, _ := exec.Command("sh", "-c", "ls "+dir).Output()
	// ruleid: go-command-injection
	_ = exec.CommandContext(r.Context(), "/bin/bash", "-c", dir).Run()
	// ok: go-command-injection
	safe, _ := exec.Command("ls", dir).Output()
	// ok: go-command-injection
	fixed, _ := exec.Command("sh", "-c", "ls -la").Output()
	w.Write(append(append(out, safe...), fixed...))
}
