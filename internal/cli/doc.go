// Package cli holds driftless's subcommands: their flags, help text and
// their human and JSON views. It wires flags to the engine and holds no
// engine logic of its own.
package cli
