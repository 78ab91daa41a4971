// Package controller holds driftless's reconcilers. They are thin: they
// load a Sync, call the engine (source, render, plan, apply) in a straight
// pipeline, and write what happened to the Sync's status and events. The
// engine's decisions live in the engine packages, not here.
package controller
