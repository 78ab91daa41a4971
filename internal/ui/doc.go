// Package ui is driftless's web dashboard, `driftless ui`: server-rendered
// pages of the Syncs of every cluster the viewer can reach, followed live
// through watches (Server-Sent Events), and three actions — sync now,
// suspend, resume.
//
// Every read and write goes through the clients it is given, built from
// the viewer's own kubeconfig: the dashboard grants nothing, and the API
// server's RBAC refuses what the viewer may not do. Locally it serves on
// loopback only, to whoever has the URL it prints (a token per run, kept
// in a session cookie). In the agent (Options.Auth) each viewer signs in
// with their own bearer token, which the API server reviews, as it
// authorises each view and action (live streams again and again); every
// other read and write impersonates the viewer. Templates, style and
// script are embedded; pages are readable without JavaScript.
//
// It is not an agent: it never reads or writes as the agent, and it writes
// nothing but what syncview's RequestSync and SetSuspend write.
package ui
