#!/usr/bin/env bash
# The image automation demo, behind `make demo-images`: a new tag in a
# registry becomes a commit in git, first only reported, then committed,
# pushed and applied. Everything runs on loopback: a local control plane, a
# registry (hack/registry), a git repository in .local/ and the agent.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

. hack/demo-lib.sh

demo_dir="$root/.local/demo-images"
export DRIFTLESS_LOCAL_DIR="$demo_dir/cluster"
# Whatever the demo starts is stopped on the way out (hack/demo-lib.sh).
agent_pid=""
registry_pid=""
demo_traps

say "Starting a local Kubernetes cluster and an image registry, both on loopback"
hack/local-cluster.sh down >/dev/null
rm -rf "$demo_dir" && mkdir -p "$demo_dir"
CGO_ENABLED=0 go build -o bin/registry ./hack/registry
kubeconfig="$(hack/local-cluster.sh up 3>&- 4>&-)"
export KUBECONFIG="$kubeconfig"
kubectl() { "$root/bin/k8s/kubectl" "$@"; }
git() { command git -c user.name="Platform Team" -c user.email=platform@example.com "$@"; }

bin/registry serve "$demo_dir/registry.addr" >"$demo_dir/registry.log" 2>&1 3>&- 4>&- &
registry_pid=$!
demo_stops "the registry" registry_pid
for _ in $(seq 1 100); do [[ -s "$demo_dir/registry.addr" ]] && break; sleep 0.1; done
[[ -s "$demo_dir/registry.addr" ]] || { echo "the registry did not start:"; cat "$demo_dir/registry.log"; exit 1; }
registry="$(cat "$demo_dir/registry.addr")"
image="$registry/shop/app"
note "registry $registry (go-containerregistry, in memory), pid $registry_pid"
run bin/registry push "$image:1.2.2"

say "A git repository whose Deployment carries a Flux v2 setter comment"
git init --quiet --bare --initial-branch=main "$demo_dir/fleet.git"
git clone --quiet "$demo_dir/fleet.git" "$demo_dir/work" 2>/dev/null
mkdir -p "$demo_dir/work/apps"
cat > "$demo_dir/work/apps/namespace.yaml" <<'EOF'
apiVersion: v1
kind: Namespace
metadata:
  name: shop
EOF
cat > "$demo_dir/work/apps/app.yaml" <<EOF
apiVersion: apps/v1
kind: Deployment
metadata:
  name: app
  namespace: shop
spec:
  replicas: 1
  selector:
    matchLabels: {app: app}
  template:
    metadata:
      labels: {app: app}
    spec:
      containers:
      - name: app
        # the tag follows ImagePolicy driftless-system/app
        image: $image:1.2.2 # {"\$imagepolicy": "driftless-system:app"}
EOF
git -C "$demo_dir/work" add -A
git -C "$demo_dir/work" commit --quiet -m "Add the shop app"
git -C "$demo_dir/work" push --quiet origin main
run grep -n imagepolicy "$demo_dir/work/apps/app.yaml"

say "Running the agent"
agent=(bin/driftless agent --kubeconfig "$KUBECONFIG"
  --git-url "file://$demo_dir/fleet.git" --git-branch main --git-path apps --sync-interval 5s
  --cache-dir "$demo_dir/cache" --metrics-bind-address 0 --health-probe-bind-address 0)
start_agent

jsonpath() { kubectl "$@" 2>/dev/null; }
applied_revision() { jsonpath -n driftless-system get sync default -o jsonpath='{.status.lastAppliedRevision}'; }
revision_is() { [[ "$(applied_revision)" == "$1" ]]; }
running_image() { jsonpath -n shop get deployment app -o jsonpath='{.spec.template.spec.containers[0].image}'; }
running_is() { [[ "$(running_image)" == "$1" ]]; }
latest_tag_is() { [[ "$(jsonpath -n driftless-system get imagepolicy app -o jsonpath='{.status.latestTag}')" == "$1" ]]; }
pending_is() { [[ "$(jsonpath -n driftless-system get sync default -o jsonpath='{.status.imageUpdate.pending[0].new}')" == "$1" ]]; }
git_head() { command git -C "$demo_dir/fleet.git" rev-parse main; }
head_is_not() { [[ "$(git_head)" != "$1" ]]; }

head="$(git_head)"
wait_for "the first sync" revision_is "$head"
run kubectl -n shop get deployment app -o wide

say "An ImagePolicy: the highest 1.x tag of $image"
cat > "$demo_dir/imagepolicy.yaml" <<EOF
apiVersion: driftless.dev/v1alpha1
kind: ImagePolicy
metadata:
  name: app
  namespace: driftless-system
spec:
  image: $image
  policy:
    semver: {range: "^1"}
  interval: 2s
EOF
cat "$demo_dir/imagepolicy.yaml"
run kubectl apply -f "$demo_dir/imagepolicy.yaml"
wait_for "the first scan" latest_tag_is 1.2.2
run kubectl -n driftless-system get imagepolicy app

say "Image automation on the Sync, in Report mode first: it says what it would commit, and commits nothing"
patch='{"spec":{"imageUpdate":{"mode":"Report","author":{"name":"Image Bot","email":"image-bot@example.com"}}}}'
run kubectl -n driftless-system patch sync default --type merge -p "$patch"

say "A new image is pushed: app:1.2.3"
run bin/registry push "$image:1.2.3"
wait_for "the policy to select 1.2.3" latest_tag_is 1.2.3
run kubectl -n driftless-system get imagepolicy app
wait_for "the Report" pending_is "$image:1.2.3"
run bin/driftless image list -n driftless-system --kubeconfig "$KUBECONFIG"
note "The event says the same; git has no new commit, the cluster still runs 1.2.2:"
kubectl -n driftless-system get events --field-selector involvedObject.kind=Sync,reason=ImageUpdatePending \
  -o jsonpath='{range .items[*]}    {.message}{"\n"}{end}'
(cd "$demo_dir/fleet.git" && run git log --oneline main)
running_is "$image:1.2.2" || { echo "the cluster runs $(running_image), not 1.2.2, in Report mode"; exit 1; }

say "Trusting it: mode Commit"
run kubectl -n driftless-system patch sync default --type merge -p '{"spec":{"imageUpdate":{"mode":"Commit"}}}'
wait_for "the commit" head_is_not "$head"
note "A commit by the robot, naming the file, the line, the old and new tag and the policy:"
(cd "$demo_dir/fleet.git" && run git log -1 --stat --format=fuller main && run git show --format= main)
head="$(git_head)"
wait_for "the Sync to apply the commit" revision_is "$head"
wait_for "the cluster to run 1.2.3" running_is "$image:1.2.3"
note "The Sync applied the robot's commit like any other: the cluster runs 1.2.3."
run kubectl -n shop get deployment app -o wide
kubectl -n driftless-system get events --field-selector involvedObject.kind=Sync,reason=ImageUpdateCommitted \
  -o jsonpath='{range .items[*]}    {.message}{"\n"}{end}'
run bin/driftless image list -n driftless-system --kubeconfig "$KUBECONFIG"

say "Done: a new tag became a reported change, then a commit in git, then what the cluster runs. Cleaning up."
