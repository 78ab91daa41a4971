package main

import (
	"fmt"
	"path"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// appsPerNamespace spreads the generated apps over namespaces.
const appsPerNamespace = 25

// workload is a generated fleet: apps of four objects each (ServiceAccount,
// ConfigMap, headless Service, Deployment with zero replicas) spread over
// namespaces that the files also define. Every contender gets its own
// workload, under its own namespace prefix, so that none applies into
// objects another one wrote.
type workload struct {
	prefix     string
	apps       int
	namespaces []string
	// files are the manifests as they are committed to git and given to
	// kubectl: 00-namespaces/<ns>.yaml, then apps/<ns>/<app>.yaml with four
	// documents each. The 00- keeps kubectl, which applies in file order,
	// from reaching an app before its namespace; driftless does not care.
	files map[string]string
}

// newWorkload generates the workload of apps apps under prefix.
func newWorkload(prefix string, apps int) *workload {
	w := &workload{prefix: prefix, apps: apps, files: map[string]string{}}
	for i := 0; i < apps; i++ {
		ns := w.namespaceOf(i)
		if i%appsPerNamespace == 0 {
			w.namespaces = append(w.namespaces, ns)
			w.files["00-namespaces/"+ns+".yaml"] = namespaceYAML(ns)
		}
		w.files[w.appFile(i)] = appYAML(ns, appName(i), "v1")
	}
	return w
}

// objects is the number of objects the workload defines.
func (w *workload) objects() int { return 4*w.apps + len(w.namespaces) }

func (w *workload) namespaceOf(app int) string {
	return fmt.Sprintf("%s-%02d", w.prefix, app/appsPerNamespace)
}

func (w *workload) appFile(app int) string {
	return path.Join("apps", w.namespaceOf(app), appName(app)+".yaml")
}

// changed returns the files of a one-object change: app's ConfigMap gets
// version in its data.
func (w *workload) changed(app int, version string) map[string]string {
	return map[string]string{w.appFile(app): appYAML(w.namespaceOf(app), appName(app), version)}
}

// parsed returns the objects of the files, Namespaces first, in a stable
// order.
func (w *workload) parsed() (namespaces, rest []*unstructured.Unstructured, err error) {
	names := make([]string, 0, len(w.files))
	for name := range w.files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		for _, doc := range strings.Split(w.files[name], "\n---\n") {
			var u unstructured.Unstructured
			if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
				return nil, nil, fmt.Errorf("%s: %w", name, err)
			}
			if u.GetKind() == "Namespace" {
				namespaces = append(namespaces, &u)
			} else {
				rest = append(rest, &u)
			}
		}
	}
	return namespaces, rest, nil
}

func appName(i int) string { return fmt.Sprintf("app-%04d", i) }

func namespaceYAML(ns string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata:
  name: %s
  labels:
    team: bench
`, ns)
}

// appYAML is one app: what a team's directory usually holds for a small
// service. The Service is headless because the local control plane's
// service range (10.0.0.0/24) has room for only 254 cluster IPs.
func appYAML(ns, name, version string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: ServiceAccount
metadata:
  name: %[2]s
  namespace: %[1]s
  labels:
    app.kubernetes.io/name: %[2]s
    app.kubernetes.io/part-of: bench
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: %[2]s
  namespace: %[1]s
  labels:
    app.kubernetes.io/name: %[2]s
    app.kubernetes.io/part-of: bench
data:
  LOG_LEVEL: info
  CONFIG_VERSION: %[3]s
  app.properties: |
    server.port=8080
    server.shutdown=graceful
    management.endpoints.web.exposure.include=health,info,prometheus
    spring.datasource.url=jdbc:postgresql://db.%[1]s.svc:5432/%[2]s
    spring.datasource.hikari.maximum-pool-size=10
    feature.new-checkout=false
---
apiVersion: v1
kind: Service
metadata:
  name: %[2]s
  namespace: %[1]s
  labels:
    app.kubernetes.io/name: %[2]s
    app.kubernetes.io/part-of: bench
spec:
  clusterIP: None
  selector:
    app.kubernetes.io/name: %[2]s
  ports:
  - name: http
    port: 80
    targetPort: http
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[2]s
  namespace: %[1]s
  labels:
    app.kubernetes.io/name: %[2]s
    app.kubernetes.io/part-of: bench
spec:
  replicas: 0
  selector:
    matchLabels:
      app.kubernetes.io/name: %[2]s
  template:
    metadata:
      labels:
        app.kubernetes.io/name: %[2]s
        app.kubernetes.io/part-of: bench
    spec:
      serviceAccountName: %[2]s
      containers:
      - name: app
        image: registry.example.com/bench/%[2]s:1.4.2
        ports:
        - name: http
          containerPort: 8080
        envFrom:
        - configMapRef:
            name: %[2]s
        env:
        - name: JAVA_TOOL_OPTIONS
          value: -XX:MaxRAMPercentage=75
        resources:
          requests:
            cpu: 50m
            memory: 256Mi
          limits:
            memory: 512Mi
        readinessProbe:
          httpGet:
            path: /healthz
            port: http
          periodSeconds: 10
`, ns, name, version)
}
