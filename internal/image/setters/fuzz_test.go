package setters

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzParseMarker checks that any comment either is no marker, a marker
// error, or a marker whose parts round-trip; never a panic. The seed
// corpus is in testdata/fuzz/FuzzParseMarker.
func FuzzParseMarker(f *testing.F) {
	for _, s := range []string{
		`# {"$imagepolicy": "flux-system:app"}`,
		`{"$imagepolicy": "ns:app:tag"}`,
		`# {"$imagepolicy": ":"}`,
		`# $imagepolicy`,
		`# just a comment`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, comment string) {
		m, ok, err := ParseMarker(comment)
		if !ok {
			if err != nil || m != (Marker{}) {
				t.Fatalf("not a marker but err=%v m=%+v", err, m)
			}
			return
		}
		if err != nil {
			if m != (Marker{}) {
				t.Fatalf("error %v with a marker %+v", err, m)
			}
			return
		}
		value := m.Namespace + ":" + m.Name
		if m.Field != FieldImage {
			value += ":" + string(m.Field)
		}
		again, _ := json.Marshal(map[string]string{MarkerKey: value})
		m2, ok2, err2 := ParseMarker(string(again))
		if !ok2 || err2 != nil || m2 != m {
			t.Fatalf("%+v does not round-trip through %s: %+v %v", m, again, m2, err2)
		}
		if strings.ContainsAny(m.Namespace+m.Name, ":/ ") {
			t.Fatalf("policy name parts %q/%q contain separators", m.Namespace, m.Name)
		}
	})
}

// FuzzUpdateFile feeds arbitrary YAML to the rewriter: it must not panic,
// and a file with problems is returned unchanged.
func FuzzUpdateFile(f *testing.F) {
	f.Add([]byte("image: registry.example.com/app:1.0.0 # {\"$imagepolicy\": \"flux-system:app\"}\n"))
	f.Add([]byte("a:\n  - b: 'x:1' # {\"$imagepolicy\": \"flux-system:web:tag\"}\n---\nkind: Deployment\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		out, _, problems := UpdateFile("f.yaml", data, fakeLookup{})
		if len(problems) > 0 && string(out) != string(data) {
			t.Fatalf("problems %v and the content changed", problems)
		}
	})
}
