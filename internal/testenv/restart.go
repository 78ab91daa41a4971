package testenv

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
)

// Components that StopComponent and StartComponent handle.
const (
	// Etcd is the etcd component's name.
	Etcd = etcdName
	// APIServer is the kube-apiserver component's name.
	APIServer = apiserverName
)

// StopComponent kills one running component (Etcd or APIServer) with
// SIGKILL, as a crash, and waits for it to exit, leaving its data, ports
// and the other components as they are: a fault a test starts and ends
// with StartComponent.
func (cp *ControlPlane) StopComponent(name string) error {
	i := -1
	for j, cmd := range cp.procs {
		if filepath.Base(cmd.Path) == name {
			i = j
		}
	}
	if i < 0 {
		return fmt.Errorf("%s is not running", name)
	}
	cmd := cp.procs[i]
	err := stopPID(cmd.Process.Pid, 0)
	_ = cmd.Wait()
	cp.procs = slices.Delete(cp.procs, i, i+1)
	return err
}

// StartComponent starts a component StopComponent stopped, with the same
// arguments (so the same ports and data), and waits until it is ready.
func (cp *ControlPlane) StartComponent(ctx context.Context, name string) error {
	args, ok := cp.args[name]
	if !ok || (name != etcdName && name != apiserverName) {
		return fmt.Errorf("cannot restart %s: only %s and %s, after Start", name, etcdName, apiserverName)
	}
	for _, cmd := range cp.procs {
		if filepath.Base(cmd.Path) == name {
			return fmt.Errorf("%s is already running", name)
		}
	}
	if err := cp.launch(name, nil, args...); err != nil {
		return err
	}
	switch name {
	case etcdName:
		return cp.waitReady(ctx, name, http.DefaultClient, flagValue(args, "--advertise-client-urls")+"/health")
	default:
		client, err := cp.adminHTTPClient(pki{dir: filepath.Join(cp.Dir, "pki")})
		if err != nil {
			return err
		}
		return cp.waitReady(ctx, name, client, cp.APIServerURL+"/readyz")
	}
}

func flagValue(args []string, flag string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			return v
		}
	}
	return ""
}
