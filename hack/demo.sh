#!/usr/bin/env bash
# The driftless demo, behind `make demo`: the seed's story end to end on a
# local control plane and a local git repository.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

. hack/demo-lib.sh

demo_dir="$root/.local/demo"
# A cluster of its own, started fresh, so every run tells the same story.
export DRIFTLESS_LOCAL_DIR="$demo_dir/cluster"
# Whatever the demo starts is stopped on the way out (hack/demo-lib.sh).
agent_pid=""
demo_traps

say "Starting a local Kubernetes cluster: etcd, kube-apiserver, controller-manager, scheduler (v1.37, built from Go modules) and a simulated node (kwok)"
hack/local-cluster.sh down >/dev/null
rm -rf "$demo_dir" && mkdir -p "$demo_dir"
kubeconfig="$(hack/local-cluster.sh up 3>&- 4>&-)"
export KUBECONFIG="$kubeconfig"
kubectl() { "$root/bin/k8s/kubectl" "$@"; }
git() { command git -c user.name="Platform Team" -c user.email=platform@example.com "$@"; }

say "Creating a git repository laid out like the field report: namespaces/ and workloads/"
git init --quiet --bare --initial-branch=main "$demo_dir/fleet.git"
git clone --quiet "$demo_dir/fleet.git" "$demo_dir/work" 2>/dev/null
cd "$demo_dir/work"
mkdir -p namespaces workloads
cat > namespaces/team-b.yaml <<'EOF'
apiVersion: v1
kind: Namespace
metadata:
  name: team-b
EOF
cat > workloads/app.yaml <<'EOF'
apiVersion: apps/v1
kind: Deployment
metadata:
  name: app
  namespace: shop
spec:
  replicas: 2
  selector:
    matchLabels: {app: app}
  template:
    metadata:
      labels: {app: app}
    spec:
      containers:
      - name: app
        image: nginx:1.27
        resources:
          limits:
            memory: "512Mi"
EOF
cat > workloads/app-config.yaml <<'EOF'
apiVersion: v1
kind: ConfigMap
metadata:
  name: app-config
  namespace: shop
data:
  GREETING: hello
EOF
# The Namespace sorts after the Deployment that lives in it: Flux v1
# applied files alphabetically and failed here; driftless orders by kind.
cat > workloads/zz-namespace.yaml <<'EOF'
apiVersion: v1
kind: Namespace
metadata:
  name: shop
EOF
git add -A && git commit --quiet -m "Add the shop app" && git push --quiet origin main
run find namespaces workloads -type f
note "workloads/zz-namespace.yaml sorts after workloads/app.yaml, which needs it."

say "An age key for secrets in git: its private half goes into the cluster only"
cd "$root"
run kubectl create namespace driftless-system
run bin/driftless secret keygen --kubeconfig "$KUBECONFIG" --create-secret driftless-system/sops-age | tee "$demo_dir/recipient"
recipient="$(grep -o 'age1[0-9a-z]*' "$demo_dir/recipient" | head -1)"

# The webhook receiver listens on loopback, on a port of its own so that
# two demos can run side by side; its secret is a Secret, as in a cluster.
hook_port=$((20000 + RANDOM % 10000))
hook_secret="demo-$RANDOM$RANDOM"
kubectl -n driftless-system create secret generic driftless-webhook --from-literal=github="$hook_secret" >/dev/null

say "Running the agent with the field report's flags (and the key for SOPS files, and a webhook receiver)"
agent=(bin/driftless agent --kubeconfig "$KUBECONFIG"
  --git-url "file://$demo_dir/fleet.git" --git-branch main
  --git-path namespaces,workloads --sync-interval 5s --sync-wait --full-resync-interval 1h
  --sops-age-key-secret driftless-system/sops-age
  --webhook-bind-address "127.0.0.1:$hook_port" --webhook-secret driftless-webhook
  --metrics-bind-address 0 --health-probe-bind-address 0)
start_agent

applied_revision() {
  kubectl -n driftless-system get sync default -o jsonpath='{.status.lastAppliedRevision}'
}
revision_is() { [[ "$(applied_revision)" == "$1" ]]; }

head="$(git -C "$demo_dir/work" rev-parse HEAD)"
note "--sync-wait: the Sync becomes Ready only when what it applied is healthy."
wait_for "the first sync" revision_is "$head"
say "Synced. The Sync is Ready at the commit just pushed, once the rollout finished:"
run kubectl get syncs -A
run kubectl -n shop get deployment app -o wide
run kubectl -n shop get pods -o wide
run kubectl get namespaces shop team-b
run kubectl -n shop get deployment,configmap -l driftless.dev/sync=driftless-system.default
note "Every object carries the owner label and where it came from in git:"
run kubectl -n shop get deployment app -o jsonpath='{.metadata.annotations.driftless\.dev/origin}{"\n"}'

say "A limit change is a commit: memory 512Mi -> 1Gi"
sed -i 's/memory: "512Mi"/memory: "1Gi"/' "$demo_dir/work/workloads/app.yaml"
git -C "$demo_dir/work" diff --stat
git -C "$demo_dir/work" commit --quiet -am "Raise the app's memory limit to 1Gi" && git -C "$demo_dir/work" push --quiet origin main
head="$(git -C "$demo_dir/work" rev-parse HEAD)"
wait_for "the limit change" revision_is "$head"
run kubectl -n shop get deployment app -o jsonpath='{.spec.template.spec.containers[0].resources.limits.memory}{"\n"}'

say "Removing a file from git prunes its object"
git -C "$demo_dir/work" rm --quiet workloads/app-config.yaml
git -C "$demo_dir/work" commit --quiet -m "Drop app-config" && git -C "$demo_dir/work" push --quiet origin main
head="$(git -C "$demo_dir/work" rev-parse HEAD)"
wait_for "the prune" revision_is "$head"
run kubectl -n shop get configmap app-config || note "app-config is gone: pruned."

say "The repositories people have: a Kustomize overlay, a Helm chart and an encrypted Secret"
cd "$demo_dir/work"
mkdir -p bases/web workloads/web charts/hello/templates
cat > bases/web/kustomization.yaml <<'EOF'
resources: [deployment.yaml]
configMapGenerator:
- name: web-config
  literals: [GREETING=hello]
EOF
cat > bases/web/deployment.yaml <<'EOF'
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 1
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: nginx:1.27
        envFrom:
        - configMapRef: {name: web-config}
EOF
cat > workloads/web/kustomization.yaml <<'EOF'
# The production overlay of bases/web: two replicas, in the shop namespace.
namespace: shop
namePrefix: prod-
resources: [../../bases/web]
replicas:
- name: web
  count: 2
EOF
cat > charts/hello/Chart.yaml <<'EOF'
apiVersion: v2
name: hello
version: 0.1.0
EOF
cat > charts/hello/values.yaml <<'EOF'
greeting: hello
EOF
cat > charts/hello/templates/configmap.yaml <<'EOF'
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-greeting
data:
  greeting: {{ .Values.greeting | quote }}
  kubernetes: {{ .Capabilities.KubeVersion.Version | quote }}
EOF
cat > workloads/hello-chart.yaml <<'EOF'
apiVersion: driftless.dev/v1alpha1
kind: HelmChart
metadata: {name: hello, namespace: shop}
spec:
  chart: {path: charts/hello}
  values: {greeting: "hello from a chart"}
EOF
cat > workloads/db-secret.yaml <<'EOF'
apiVersion: v1
kind: Secret
metadata:
  name: db
  namespace: shop
stringData:
  password: correct-horse-battery-staple
EOF
run "$root/bin/driftless" secret encrypt -i --age "$recipient" workloads/db-secret.yaml
note "Only the value is encrypted; the rest of the file stays readable in a diff:"
sed -n '1,7p' workloads/db-secret.yaml | cut -c1-90
git add -A && git commit --quiet -m "Add the web overlay, the hello chart and the db Secret" && git push --quiet origin main
cd "$root"
note "driftless build renders offline what the agent will apply, each object with its origin:"
run bin/driftless build --repo "$demo_dir/work" --path workloads/web,workloads/hello-chart.yaml
head="$(git -C "$demo_dir/work" rev-parse HEAD)"
wait_for "the overlay, the chart and the Secret" revision_is "$head"
run kubectl -n shop get deployment,configmap,secret -l driftless.dev/sync=driftless-system.default
note "Each object names the file it came from, through the overlay or the chart:"
for obj in deployment/prod-web configmap/hello-greeting secret/db; do
  printf '    %s: %s\n' "$obj" "$(kubectl -n shop get "$obj" -o jsonpath='{.metadata.annotations.driftless\.dev/origin}')"
done
run bin/driftless tree driftless-system/default --kubeconfig "$KUBECONFIG"

say "Someone edits the Deployment by hand: kubectl edit, memory 1Gi -> 3Gi"
note "(a real kubectl edit, with a non-interactive editor)"
run env KUBE_EDITOR="sed -i s/memory:\ 1Gi/memory:\ 3Gi/" "$root/bin/k8s/kubectl" -n shop edit deployment app
memory_is() { [[ "$(kubectl -n shop get deployment app -o jsonpath='{.spec.template.spec.containers[0].resources.limits.memory}')" == "$1" ]]; }
wait_for "the revert" memory_is 1Gi
note "driftless watches what it manages and put it back at once, without waiting for the interval:"
run kubectl -n shop get deployment app -o jsonpath='{.spec.template.spec.containers[0].resources.limits.memory}{"\n"}'
note "The event says what it put back, who had changed it, and where to change it properly:"
wait_for "the revert event" bash -c "'$root/bin/k8s/kubectl' -n shop get events --field-selector involvedObject.name=app,reason=DriftReverted -o name | grep -q ."
kubectl -n shop get events --field-selector involvedObject.name=app,reason=DriftReverted -o jsonpath='{range .items[*]}{.message}{"\n"}{end}'

say "A push syncs at once: a Sync with a 1h interval, woken by a signed GitHub-style webhook"
cd "$demo_dir/work"
mkdir -p hooked
printf 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: banner, namespace: shop}\ndata: {text: "v1"}\n' > hooked/banner.yaml
git add -A && git commit --quiet -m "Add the banner" && git push --quiet origin main
cd "$root"
kubectl apply -f - <<EOF
apiVersion: driftless.dev/v1alpha1
kind: Sync
metadata: {name: hooked, namespace: driftless-system}
spec:
  source: {git: {url: "file://$demo_dir/fleet.git", branch: main}}
  paths: [hooked]
  interval: 1h
EOF
banner_is() { [[ "$(kubectl -n shop get configmap banner -o jsonpath='{.data.text}')" == "$1" ]]; }
wait_for "the hooked Sync's first sync" banner_is v1
sed -i 's/"v1"/"v2"/' "$demo_dir/work/hooked/banner.yaml"
git -C "$demo_dir/work" commit --quiet -am "Banner v2" && git -C "$demo_dir/work" push --quiet origin main
note "What GitHub sends after a push, signed with the webhook secret (HMAC-SHA256 of the body):"
payload="{\"ref\":\"refs/heads/main\",\"repository\":{\"clone_url\":\"file://$demo_dir/fleet.git\"}}"
signature="sha256=$(printf '%s' "$payload" | openssl dgst -sha256 -hmac "$hook_secret" -r | cut -d' ' -f1)"
pushed=$(date +%s%N)
run curl -sS -X POST "http://127.0.0.1:$hook_port/hooks/github" -H "X-GitHub-Event: push" \
  -H "X-GitHub-Delivery: demo-$pushed" -H "X-Hub-Signature-256: $signature" --data "$payload"
echo
wait_for "the pushed banner" banner_is v2
note "Applied $(( ($(date +%s%N) - pushed) / 1000000 )) ms after the push, without waiting for the 1h interval:"
run kubectl -n shop get configmap banner -o jsonpath='{.data.text}{"\n"}'

say "Every sync is a record: the Sync's status and history"
run kubectl -n driftless-system get sync default -o wide
kubectl -n driftless-system get sync default -o jsonpath='{range .status.drift[*]}drift: {.object} {.action}: {.message}{"\n"}{end}'
run bin/driftless history driftless-system/default --kubeconfig "$KUBECONFIG"
say "...and an Event per sync"
run kubectl -n driftless-system get events --field-selector involvedObject.kind=Sync -o custom-columns=REASON:.reason,MESSAGE:.message

say "The same in a browser, live: bin/driftless ui --kubeconfig $KUBECONFIG --open"
if [[ "${DEMO_UI:-}" == 1 ]]; then
  note "DEMO_UI=1: serving the dashboard on 127.0.0.1:9393 until Ctrl-C (open the address it prints, with its token), then cleaning up."
  "$root/bin/driftless" ui --kubeconfig "$KUBECONFIG" --address 127.0.0.1:9393 || true
else
  note "Run DEMO_UI=1 make demo to keep this cluster up with the dashboard on 127.0.0.1:9393 (the address it prints, with its token) until Ctrl-C."
fi

say "Done: plain files, an overlay, a chart and an encrypted Secret applied, changed and pruned from git, every step recorded. Cleaning up."
