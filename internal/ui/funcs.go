package ui

import (
	"html/template"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driftless/driftless/internal/source"
)

var funcs = template.FuncMap{
	"short": source.Short,
	"join":  strings.Join,
	// utc is a time as an ISO 8601 instant, for <time datetime> and text.
	"utc": func(t any) string {
		switch v := t.(type) {
		case time.Time:
			if v.IsZero() {
				return ""
			}
			return v.UTC().Format(time.RFC3339)
		case metav1.Time:
			if v.IsZero() {
				return ""
			}
			return v.UTC().Format(time.RFC3339)
		case *metav1.Time:
			if v == nil || v.IsZero() {
				return ""
			}
			return v.UTC().Format(time.RFC3339)
		}
		return ""
	},
	// state is the CSS class of a Ready or health value.
	"state": func(v string) string {
		switch v {
		case "True", "Current", "Succeeded":
			return "ok"
		case "False", "Failed", "Missing":
			return "bad"
		}
		return "warn"
	},
}
