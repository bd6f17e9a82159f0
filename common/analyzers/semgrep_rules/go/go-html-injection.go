package views

import "html/template"

func Bio(comment string) map[string]any {
	return map[string]any{
		// ruleid: go-html-injection
		"Comment": template.HTML(comment),
		// ok: go-html-injection
		"Footer": template.HTML("<hr>"),
		// ok: go-html-injection
		"Plain": comment,
	}
}
