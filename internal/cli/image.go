package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/image/policy"
	"github.com/spf13/cobra"
)

func newImageCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "image",
		Short: "Image automation: list ImagePolicies and what they would change, scan one now",
		Long: `Image automation turns a new image in a registry into a commit in git
(docs/image-automation.md). ImagePolicies choose a tag; Syncs with
spec.imageUpdate rewrite the markers in their repository to it.`,
	}
	cmd.AddCommand(newImageListCommand(), newImageScanCommand())
	return cmd
}

type imageListOptions struct {
	cluster       clusterFlags
	namespace     string
	allNamespaces bool
	output        string
}

// imageList is the data of `driftless image list`.
type imageList struct {
	Policies []imagePolicyRow `json:"policies"`
	// Updates are the Syncs with spec.imageUpdate and what they would
	// change or last committed.
	Updates []imageUpdateRow `json:"updates"`
}

type imagePolicyRow struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Image     string `json:"image"`
	Latest    string `json:"latest,omitempty"`
	Digest    string `json:"digest,omitempty"`
	Ready     string `json:"ready"`
	Reason    string `json:"reason,omitempty"`
	Message   string `json:"message,omitempty"`
}

type imageUpdateRow struct {
	Sync       string                 `json:"sync"`
	Mode       string                 `json:"mode"`
	Pending    []v1alpha1.ImageChange `json:"pending,omitempty"`
	LastCommit string                 `json:"lastCommit,omitempty"`
	Problems   []string               `json:"problems,omitempty"`
	// PullRequest is PullRequest mode's request.
	PullRequest *v1alpha1.PullRequestStatus `json:"pullRequest,omitempty"`
}

func newImageListCommand() *cobra.Command {
	o := &imageListOptions{}
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List ImagePolicies with their latest tag, and what each Sync's image update would change",
		Long: `List the ImagePolicies of a namespace (the kubeconfig context's, -n, or every
one with -A): the image, the tag the policy selected and whether its last
scan succeeded. Below, each Sync with spec.imageUpdate: its mode, the changes
Report mode would commit (file:line, old -> new, policy), its last commit and
the markers it could not apply.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runImageList(cmd.Context(), o, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVarP(&o.namespace, "namespace", "n", "", "namespace to list (default: the kubeconfig context's)")
	cmd.Flags().BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "list every namespace")
	addOutputFlag(cmd, &o.output)
	o.cluster.add(cmd)
	return cmd
}

func runImageList(ctx context.Context, o *imageListOptions, out io.Writer) error {
	v, err := newView(o.output, tableView[imageList](renderImageList))
	if err != nil {
		return err
	}
	c, ctxNamespace, host, err := o.cluster.syncClient()
	if err != nil {
		return err
	}
	var opts []client.ListOption
	if !o.allNamespaces {
		ns := o.namespace
		if ns == "" {
			ns = ctxNamespace
		}
		opts = append(opts, client.InNamespace(ns))
	}
	var policies v1alpha1.ImagePolicyList
	if err := c.List(ctx, &policies, opts...); err != nil {
		if meta.IsNoMatchError(err) {
			return &exitError{code: 2, err: fmt.Errorf("the cluster at %s serves no ImagePolicy API: is a driftless agent with image automation installed? (%w)", host, err)}
		}
		return fmt.Errorf("list ImagePolicies: %w", err)
	}
	var syncs v1alpha1.SyncList
	if err := c.List(ctx, &syncs, opts...); err != nil {
		return fmt.Errorf("list Syncs: %w", err)
	}
	var list imageList
	for _, p := range policies.Items {
		row := imagePolicyRow{Namespace: p.Namespace, Name: p.Name, Image: p.Spec.Image, Latest: p.Status.LatestTag,
			Digest: p.Status.LatestDigest, Ready: "Unknown"}
		if cond := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady); cond != nil {
			row.Ready, row.Reason, row.Message = string(cond.Status), cond.Reason, cond.Message
		}
		list.Policies = append(list.Policies, row)
	}
	for _, s := range syncs.Items {
		if s.Spec.ImageUpdate == nil {
			continue
		}
		row := imageUpdateRow{Sync: s.Namespace + "/" + s.Name, Mode: string(s.Spec.ImageUpdate.ImageUpdateModeOrDefault())}
		if u := s.Status.ImageUpdate; u != nil {
			row.Pending, row.LastCommit, row.Problems, row.PullRequest = u.Pending, u.LastCommit, u.Problems, u.PullRequest
		}
		list.Updates = append(list.Updates, row)
	}
	return v.Render(out, list)
}

func renderImageList(w io.Writer, l imageList) error {
	if len(l.Policies) == 0 && len(l.Updates) == 0 {
		_, err := fmt.Fprintln(w, "no ImagePolicies and no Syncs with spec.imageUpdate")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POLICY\tIMAGE\tLATEST\tREADY\tMESSAGE")
	for _, p := range l.Policies {
		fmt.Fprintf(tw, "%s/%s\t%s\t%s\t%s\t%s\n", p.Namespace, p.Name, p.Image, orDash(p.Latest), readyText(p.Ready, p.Reason), p.Message)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, u := range l.Updates {
		fmt.Fprintf(w, "\nSync %s (%s mode)", u.Sync, u.Mode)
		if u.LastCommit != "" {
			fmt.Fprintf(w, ", last commit %s", u.LastCommit)
		}
		fmt.Fprintln(w, ":")
		if pr := u.PullRequest; pr != nil {
			fmt.Fprintf(w, "  pull request #%d %s (%s)\n", pr.Number, pr.URL, pr.State)
		}
		if len(u.Pending) == 0 && len(u.Problems) == 0 && u.PullRequest == nil {
			fmt.Fprintln(w, "  nothing to change")
		}
		for _, c := range u.Pending {
			fmt.Fprintf(w, "  would change %s:%d %s -> %s (ImagePolicy %s)\n", c.File, c.Line, c.Old, c.New, c.Policy)
		}
		for _, p := range u.Problems {
			fmt.Fprintf(w, "  problem: %s\n", p)
		}
	}
	return nil
}

type imageScanOptions struct {
	cluster clusterFlags
	output  string
}

// imageScan is the data of `driftless image scan`.
type imageScan struct {
	Policy     string             `json:"policy"`
	Image      string             `json:"image"`
	Selected   string             `json:"selected,omitempty"`
	Digest     string             `json:"digest,omitempty"`
	Considered int                `json:"considered"`
	Skipped    int                `json:"skipped"`
	Rejected   []policy.Rejection `json:"rejected,omitempty"`
}

func newImageScanCommand() *cobra.Command {
	o := &imageScanOptions{}
	cmd := &cobra.Command{
		Use:   "scan NAMESPACE/NAME",
		Short: "Scan an ImagePolicy's registry now and print the decision",
		Long: `Scan the registry of an ImagePolicy from this machine, with the credentials of
its spec.secretRef (read from the cluster), and print the decision: the tag
selected and its digest, how many tags were considered, and every other tag
with why it was rejected (filter, exclusion, not a version, out of range,
lower). Nothing is written: the agent records its own scans in the policy's
status.

Exit status: 0 when a tag was selected, 1 when none was or the registry
could not be scanned, 2 for a policy that does not exist or wrong arguments.`,
		Example: `  driftless image scan team/app
  driftless image scan team/app -o json | jq '.rejected[] | select(.reason | startswith("outside"))'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runImageScan(cmd.Context(), o, args[0], cmd.OutOrStdout())
		},
	}
	addOutputFlag(cmd, &o.output)
	o.cluster.add(cmd)
	return cmd
}

func runImageScan(ctx context.Context, o *imageScanOptions, arg string, out io.Writer) error {
	v, err := newView(o.output, tableView[imageScan](renderImageScan))
	if err != nil {
		return err
	}
	ns, name, ok := strings.Cut(arg, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return &exitError{code: 2, err: fmt.Errorf("%q: write the ImagePolicy as NAMESPACE/NAME; list them with `driftless image list -A`", arg)}
	}
	c, _, host, err := o.cluster.syncClient()
	if err != nil {
		return err
	}
	var p v1alpha1.ImagePolicy
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &p); err != nil {
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			return &exitError{code: 2, err: fmt.Errorf("no ImagePolicy %s in the cluster at %s: list them with `driftless image list -A`", arg, host)}
		}
		return fmt.Errorf("read ImagePolicy %s: %w", arg, err)
	}
	compiled, err := policy.Compile(p.Spec)
	if err != nil {
		return &exitError{code: 1, err: fmt.Errorf("ImagePolicy %s: %w", arg, err)}
	}
	target := policy.Target{Image: p.Spec.Image, Insecure: p.Spec.Insecure}
	if ref := p.Spec.SecretRef; ref != nil {
		repo, err := target.Repository()
		if err != nil {
			return &exitError{code: 1, err: err}
		}
		var secret corev1.Secret
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.Name}, &secret); err != nil {
			return fmt.Errorf("read the registry Secret %s/%s of ImagePolicy %s: %w", ns, ref.Name, arg, err)
		}
		if target.Auth, err = policy.AuthFromSecret(secret.Data, repo.RegistryStr()); err != nil {
			return &exitError{code: 1, err: fmt.Errorf("registry Secret %s/%s: %w", ns, ref.Name, err)}
		}
	}
	scanner := policy.NewScanner(policy.DefaultScanOptions())
	tags, err := scanner.List(ctx, target)
	if err != nil {
		return &exitError{code: 1, err: err}
	}
	d := compiled.Select(tags)
	res := imageScan{Policy: arg, Image: p.Spec.Image, Selected: d.Tag, Considered: d.Considered, Skipped: d.Skipped, Rejected: d.Rejected}
	if d.Tag != "" {
		if res.Digest, err = scanner.Digest(ctx, target, d.Tag); err != nil {
			return &exitError{code: 1, err: err}
		}
	}
	if err := v.Render(out, res); err != nil {
		return err
	}
	if d.Tag == "" {
		return &exitError{code: 1, err: fmt.Errorf("no tag of %s passes ImagePolicy %s", p.Spec.Image, arg)}
	}
	return nil
}

func renderImageScan(w io.Writer, s imageScan) error {
	if s.Selected != "" {
		fmt.Fprintf(w, "%s selects %s:%s (%s)\n", s.Policy, s.Image, s.Selected, s.Digest)
	} else {
		fmt.Fprintf(w, "%s selects no tag of %s\n", s.Policy, s.Image)
	}
	fmt.Fprintf(w, "%d tags considered, %d not parsable under the policy\n", s.Considered, s.Skipped)
	if len(s.Rejected) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "REJECTED\tWHY")
	for _, r := range s.Rejected {
		fmt.Fprintf(tw, "%s\t%s\n", r.Tag, r.Reason)
	}
	return tw.Flush()
}
