package testenv

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func keyOf(namespace, name string) client.ObjectKey {
	return client.ObjectKey{Namespace: namespace, Name: name}
}

func findManager(entries []metav1.ManagedFieldsEntry, manager string) *metav1.ManagedFieldsEntry {
	for i := range entries {
		if entries[i].Manager == manager {
			return &entries[i]
		}
	}
	return nil
}

func managers(entries []metav1.ManagedFieldsEntry) []string {
	var names []string
	for _, e := range entries {
		names = append(names, e.Manager)
	}
	return names
}
