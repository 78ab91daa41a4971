package agent

import (
	"context"
	"fmt"
	"net"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/driftless/driftless/internal/ui"
)

// dashboard is the web dashboard in its in-cluster mode
// (--ui-bind-address), a manager runnable served by every replica.
type dashboard struct {
	addr string
	srv  *ui.Server
}

// newDashboard builds the in-cluster dashboard of the agent: one cluster,
// named --cluster-name, watched with the agent's identity, each request
// reviewed, authorised and made as its viewer.
func (a *Agent) newDashboard() (*dashboard, error) {
	srv, err := ui.New(ui.Options{
		Clusters: []ui.Cluster{{Name: a.opts.ClusterName, Config: a.cfg}},
		Auth:     &ui.Auth{Client: a.direct, Config: a.cfg, TrustedProxies: a.checked.uiTrustedProxies},
	})
	if err != nil {
		return nil, fmt.Errorf("--ui-bind-address: %w", err)
	}
	return &dashboard{addr: a.opts.UIAddr, srv: srv}, nil
}

// Start serves the dashboard until ctx is done.
func (d *dashboard) Start(ctx context.Context) error {
	ln, err := net.Listen("tcp", d.addr)
	if err != nil {
		return fmt.Errorf("serve the dashboard on --ui-bind-address %s: %w", d.addr, err)
	}
	ctrl.Log.Info("dashboard serving", "address", ln.Addr().String())
	return d.srv.Serve(ctx, ln, nil)
}

// NeedLeaderElection is false: every replica serves the dashboard.
func (d *dashboard) NeedLeaderElection() bool { return false }
