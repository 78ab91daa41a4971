// Package ui is driftless's web dashboard, `driftless ui`: server-rendered
// pages of the Syncs of every cluster the viewer can reach, followed live
// through watches (Server-Sent Events), and three actions — sync now,
// suspend, resume.
//
// Every read and write goes through the clients it is given, built from
// the viewer's own kubeconfig: the dashboard grants nothing, and the API
// server's RBAC refuses what the viewer may not do. It serves on loopback
// only; it has no login of its own. Templates, style and script are
// embedded; pages are readable without JavaScript.
//
// It is not an agent: it never reads or writes as the agent, and it writes
// nothing but what syncview's RequestSync and SetSuspend write.
package ui
