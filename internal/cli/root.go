package cli

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// NewRootCommand returns the driftless command tree writing to out and errOut.
func NewRootCommand(out, errOut io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "driftless",
		Short: "Pull-based GitOps agent for Kubernetes",
		Long: `driftless keeps a Kubernetes cluster equal to a git repository.

It runs inside each cluster, pulls the desired state from git, applies it
with server-side apply, prunes what was removed from git, and puts back what
someone changed by hand, naming who changed which field.

Run "driftless <command> --help" for the flags of each command.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(out)
	root.SetErr(errOut)
	root.AddCommand(newVersionCommand(), newAgentCommand(), newDiffCommand(), newBuildCommand())
	root.AddCommand(newGetCommand(), newHistoryCommand(), newReconcileCommand(), newSuspendCommand(), newResumeCommand(),
		newHoldCommand(), newReleaseCommand())
	root.AddCommand(newExplainCommand(), newEventsCommand(), newTreeCommand(), newImageCommand(), newSecretCommand())
	root.AddCommand(newInstallCommand(), newIdentityCommand(), newCheckCommand(), newUninstallCommand(), newPushCommand())
	root.AddCommand(newUICommand())
	return root
}

// Execute runs the command line args and returns the process exit code.
func Execute(args []string, out, errOut io.Writer) int {
	root := NewRootCommand(out, errOut)
	root.SetArgs(args)
	if err := root.Execute(); err != nil {
		// An exitError without an error is a result, such as "diff found
		// changes", not a failure: it sets the code and prints nothing.
		var ee *exitError
		if !errors.As(err, &ee) || ee.err != nil {
			fmt.Fprintf(errOut, "Error: %v\n", err)
		}
		if ee != nil {
			return ee.code
		}
		return 2
	}
	return 0
}
