package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/spf13/cobra"

	"github.com/driftless/driftless/internal/source/oci"
)

// pushArtifactOptions are the flags of `driftless push artifact`.
type pushArtifactOptions struct {
	path, source, revision string
	insecure               bool
	creds                  string
}

func newPushCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "push",
		Short: "Push the files of a directory to an OCI registry as an artifact a Sync can follow",
	}
	cmd.AddCommand(newPushArtifactCommand())
	return cmd
}

func newPushArtifactCommand() *cobra.Command {
	o := &pushArtifactOptions{}
	cmd := &cobra.Command{
		Use:   "artifact oci://HOST/REPOSITORY[:TAG]",
		Short: "Push a directory as a Flux-compatible OCI artifact and print its digest",
		Long: `Push the files under --path as an OCI artifact in Flux's layout (what
flux push artifact makes and flux pull artifact reads): one gzipped tarball
layer of media type application/vnd.cncf.flux.content.v1.tar+gzip, a config of
media type application/vnd.cncf.flux.config.v1+json, and the annotations
org.opencontainers.image.source (--source), .revision (--revision) and .created.
Regular files and directories are pushed; .git and symbolic links are left out.
The tag defaults to latest. A Sync with spec.source.oci follows the artifact
(docs/sources.md). The digest printed is the one to sign with cosign or to pin
with spec.source.oci.digest.

Credentials come from --creds, else from the docker config (~/.docker/config.json,
as docker login writes it), else none.`,
		Example: `  driftless push artifact oci://ghcr.io/org/fleet-manifests:$(git rev-parse --short HEAD) \
    --path ./deploy --source "$(git config --get remote.origin.url)" \
    --revision "$(git branch --show-current)@sha1:$(git rev-parse HEAD)"
  cosign sign --key cosign.key ghcr.io/org/fleet-manifests@$(driftless push artifact … )`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runPushArtifact(cmd, o, args[0], cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringVar(&o.path, "path", ".", "the directory whose files are pushed")
	cmd.Flags().StringVar(&o.source, "source", "", "the source the files came from, such as the git repository URL (annotation org.opencontainers.image.source)")
	cmd.Flags().StringVar(&o.revision, "revision", "", "the revision the files came from, such as main@sha1:<commit> (annotation org.opencontainers.image.revision)")
	cmd.Flags().BoolVar(&o.insecure, "insecure", false, "talk plain HTTP to the registry")
	cmd.Flags().StringVar(&o.creds, "creds", "", "registry credentials as USERNAME:PASSWORD (default: the docker config's)")
	return cmd
}

func runPushArtifact(cmd *cobra.Command, o *pushArtifactOptions, url string, out, errOut io.Writer) error {
	if !strings.HasPrefix(url, "oci://") {
		return fmt.Errorf("%s is not an OCI address: write oci://<registry host>/<repository>[:<tag>]", url)
	}
	if o.source == "" || o.revision == "" {
		return errors.New("--source and --revision are required: they say where the files came from (Flux shows them)")
	}
	opts := oci.PushOptions{URL: url, Dir: o.path, Source: o.source, Revision: o.revision, Insecure: o.insecure}
	auth, err := pushAuth(url, o)
	if err != nil {
		return err
	}
	opts.Request.Auth = auth
	ref, digest, err := oci.Push(cmd.Context(), opts)
	if err != nil {
		return err
	}
	fmt.Fprintf(errOut, "pushed %s\n", ref)
	fmt.Fprintln(out, digest)
	return nil
}

func pushAuth(url string, o *pushArtifactOptions) (authn.Authenticator, error) {
	if o.creds != "" {
		user, pass, ok := strings.Cut(o.creds, ":")
		if !ok {
			return nil, errors.New("--creds must be USERNAME:PASSWORD")
		}
		return &authn.Basic{Username: user, Password: pass}, nil
	}
	repoURL, _ := oci.SplitTag(url)
	repo, err := oci.ParseRepository(repoURL, o.insecure)
	if err != nil {
		return nil, err
	}
	return authn.DefaultKeychain.Resolve(repo)
}
