package testenv

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
)

// Kubectl runs the real kubectl of BinDir against the control plane, as
// its admin, with extraEnv added to the environment (KUBE_EDITOR=...),
// and returns its standard output and error.
func (cp *ControlPlane) Kubectl(extraEnv []string, args ...string) (stdout, stderr string, err error) {
	cmd := exec.Command(filepath.Join(cp.BinDir, "kubectl"), append([]string{"--kubeconfig", cp.KubeconfigPath()}, args...)...)
	cmd.Env = append(os.Environ(), extraEnv...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}
