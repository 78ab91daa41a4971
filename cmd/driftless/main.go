// Command driftless is the pull-based GitOps agent and its CLI.
package main

import (
	"os"

	"github.com/driftless/driftless/internal/cli"
)

func main() {
	os.Exit(cli.Execute(os.Args[1:], os.Stdout, os.Stderr))
}
