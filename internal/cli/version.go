package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/clientcmd"
)

// Set at link time by the Makefile:
//
//	-X github.com/driftless/driftless/internal/cli.version=...
//	-X github.com/driftless/driftless/internal/cli.commit=...
var (
	version = "dev"
	commit  = "unknown"
)

// BuildInfo describes the running binary.
type BuildInfo struct {
	Version string `json:"version"`
	Commit  string `json:"commit"`
	// Kubernetes is the Kubernetes API version the binary was built
	// against, derived from the k8s.io/client-go module it links.
	Kubernetes string `json:"kubernetes"`
	Go         string `json:"go"`
	// Server is the version of the API server reached with --kubeconfig
	// or $KUBECONFIG, when one was given.
	Server string `json:"server,omitempty"`
}

// ReadBuildInfo returns the version information of this binary.
func ReadBuildInfo() BuildInfo {
	bi := BuildInfo{Version: version, Commit: commit, Kubernetes: "unknown", Go: runtime.Version()}
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == "k8s.io/client-go" {
				bi.Kubernetes = kubernetesVersion(dep.Version)
			}
		}
	}
	return bi
}

// kubernetesVersion maps a client-go module version (v0.37.2) to the
// Kubernetes release it belongs to (v1.37.2).
func kubernetesVersion(clientGo string) string {
	if rest, ok := strings.CutPrefix(clientGo, "v0."); ok {
		return "v1." + rest
	}
	return clientGo
}

// serverVersion asks the API server named by kubeconfig for its version.
func serverVersion(kubeconfig string) (string, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return "", fmt.Errorf("load kubeconfig %s: %w", kubeconfig, err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return "", err
	}
	v, err := dc.ServerVersion()
	if err != nil {
		return "", fmt.Errorf("ask %s for its version: %w", cfg.Host, err)
	}
	return v.GitVersion, nil
}

func newVersionCommand() *cobra.Command {
	var output, kubeconfig string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version, git commit and Kubernetes API version",
		Long: `Print driftless's version, the git commit it was built from, and the
Kubernetes API version it was built against.

With --kubeconfig (or $KUBECONFIG set) it also asks that cluster's API
server for its version, so you can check the two are compatible.`,
		Example: `  driftless version
  driftless version --kubeconfig ~/.kube/config --output json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			bi := ReadBuildInfo()
			if kubeconfig != "" {
				v, err := serverVersion(kubeconfig)
				if err != nil {
					return err
				}
				bi.Server = v
			}
			switch output {
			case "json":
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(bi)
			case "", "text":
				fmt.Fprintf(cmd.OutOrStdout(), "driftless %s\ncommit:     %s\nkubernetes: %s\ngo:         %s\n",
					bi.Version, bi.Commit, bi.Kubernetes, bi.Go)
				if bi.Server != "" {
					fmt.Fprintf(cmd.OutOrStdout(), "server:     %s\n", bi.Server)
				}
				return nil
			default:
				return fmt.Errorf("unknown --output %q: use text or json", output)
			}
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "also print the version of this cluster's API server")
	return cmd
}
