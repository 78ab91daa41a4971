package controller

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
)

// settleEchoes clears, before a sync that wrote lets drift checks run
// again, the marks on objects that are as its own writes left them. The
// watch event of a write can come before the write's answer is recorded
// (drift.Writes): its drift check, finding the sync holding the gate,
// marks the object to check and looks again after syncBusyRetry, when it
// sees the echo for what it is. A sync that starts in between (the next
// commit, pushed within a quarter of a second) would read and dry-run
// each such object again: after a large first sync, as many as the
// echoes that beat their answers. The drift watch's cache holds the
// object's resourceVersion; when it is the one the agent's last write
// returned, nobody has changed the object since, as drift's own check of
// an echo concludes. A later change by anyone else still comes as a watch
// event, and is checked then.
func (r *SyncReconciler) settleEchoes(ctx context.Context, s *v1alpha1.Sync, key client.ObjectKey, w *Writer) {
	marked := r.Store.ToCheck(key)
	if len(marked) == 0 {
		return
	}
	// The drift watches (not a stand-in of a test) hold the cache.
	watches, ok := r.watchesOf(s).(*Watches)
	if !ok || watches == nil {
		return
	}
	cached, writes := watches.reader(), r.Store.Writes()
	for id := range marked {
		o, ok := w.Applied(id)
		if ok && leftAsWritten(ctx, cached, writes, o.GVK, client.ObjectKey{Namespace: o.Namespace, Name: o.Name}) {
			r.Store.Checked(key, id)
		}
	}
}
