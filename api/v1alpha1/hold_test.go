package v1alpha1

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestAHoldReadsBackAsWritten(t *testing.T) {
	want := Hold{Revision: strings.Repeat("ab", 20), Reason: "payment errors", By: "jane", At: time.Date(2026, 12, 1, 17, 30, 0, 0, time.UTC)}
	obj := &metav1.ObjectMeta{Annotations: map[string]string{HoldAnnotation: want.Value()}}
	got, err := HoldOf(obj)
	if err != nil {
		t.Fatal(err)
	}
	if *got != want {
		t.Errorf("HoldOf(Value()) = %+v, want %+v", *got, want)
	}
	if h, err := HoldOf(&metav1.ObjectMeta{}); h != nil || err != nil {
		t.Errorf("no annotation: got %v, %v; want no hold", h, err)
	}
}

func TestAHoldThatCannotBeUsedSaysWhy(t *testing.T) {
	for _, tc := range []struct {
		name, value, want string
	}{
		{"not JSON", "abc1234", "is not JSON"},
		{"a short revision", `{"revision":"abc1234","reason":"x","by":"jane","at":"2026-12-01T17:30:00Z"}`, `revision "abc1234" is not a full commit hash`},
		{"no reason", `{"revision":"` + strings.Repeat("ab", 20) + `","reason":" ","by":"jane","at":"2026-12-01T17:30:00Z"}`, "reason is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := HoldOf(&metav1.ObjectMeta{Annotations: map[string]string{HoldAnnotation: tc.value}})
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), HoldAnnotation) {
				t.Errorf("HoldOf(%s) = %v, want an error naming %s and saying %q", tc.value, err, HoldAnnotation, tc.want)
			}
		})
	}
}
