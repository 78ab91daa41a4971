package testenv

import "fmt"

// CRDManifest is the YAML of a namespaced CustomResourceDefinition of
// kind in group (served and stored as v1), named <plural>.<group>, whose
// objects have an integer spec.size. Tests that need a custom resource
// use it with a group of their own, so that they never share a CRD.
func CRDManifest(group, kind, plural string) string {
	return fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: %[3]s.%[1]s
spec:
  group: %[1]s
  scope: Namespaced
  names: {plural: %[3]s, singular: %[4]s, kind: %[2]s, listKind: %[2]sList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
`, group, kind, plural, plural[:len(plural)-1])
}
