package render

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestOriginString(t *testing.T) {
	tests := []struct {
		name   string
		origin Origin
		want   string
	}{
		{"a manifest file", Origin{Path: "workloads/app.yaml", Doc: 3, Line: 12}, "workloads/app.yaml#3"},
		{"an object a kustomization built", Origin{Path: "apps/prod/kustomization.yaml", From: "apps/base/web.yaml"}, "apps/prod/kustomization.yaml → apps/base/web.yaml"},
		{"an object a kustomization generated", Origin{Path: "apps/prod/kustomization.yaml", From: "apps/prod/kustomization.yaml"}, "apps/prod/kustomization.yaml"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.origin.String(); got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestErrorMessage(t *testing.T) {
	problem := errors.New("something is wrong")
	tests := []struct {
		name string
		err  *Error
		want string
	}{
		{"a problem with a document and an object", &Error{Origin{Path: "workloads/app.yaml", Doc: 1, Line: 7}, "Deployment/web", problem}, "workloads/app.yaml:7 (document 1): Deployment/web: something is wrong"},
		{"a problem with a document", &Error{Origin{Path: "app.yaml", Doc: 0, Line: 1}, "", problem}, "app.yaml:1 (document 0): something is wrong"},
		{"a problem with a whole file", &Error{Origin{Path: "app.yaml"}, "", problem}, "app.yaml: something is wrong"},
		{"a problem with an object a kustomization built", &Error{Origin{Path: "prod/kustomization.yaml", From: "base/web.yaml"}, "Deployment/web", problem}, "prod/kustomization.yaml → base/web.yaml: Deployment/web: something is wrong"},
		{"a problem with a path", &Error{Origin{}, "", problem}, "something is wrong"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.err.Error(); got != tt.want {
				t.Errorf("Error() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestErrorsCanBeTakenApart(t *testing.T) {
	files := map[string]string{
		"a.yaml": "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n",
		"b.yaml": "kind: [\n",
	}
	_, err := render(t, files, Options{})

	var first *Error
	if !errors.As(err, &first) || first.Origin.Path != "a.yaml" {
		t.Errorf("errors.As found %v, want the a.yaml error", first)
	}
	if !errors.Is(err, ErrUnknownKind) {
		t.Errorf("errors.Is(err, ErrUnknownKind) = false for %v", err)
	}
	want := []Origin{{Path: "a.yaml", Line: 1}, {Path: "b.yaml", Line: 1}}
	for _, err := range []error{err, fmt.Errorf("sync team-a/web: %w", err)} {
		var got []Origin
		for _, e := range Errors(err) {
			got = append(got, e.Origin)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Errors(%T) origins (-want +got):\n%s", err, diff)
		}
	}
	if got := Errors(errors.New("plain")); got != nil {
		t.Errorf("Errors(plain error) = %v, want nil", got)
	}
}
