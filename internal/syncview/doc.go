// Package syncview reads what an operator sees of a Sync — its row in a
// list, its objects with their health and origin, the fields each manager
// of an object owns — and makes the two requests an operator makes of it:
// sync now and suspend or resume. The cli prints these values and the web
// dashboard (internal/ui) shows them; neither computes them a second way.
//
// It reads and writes with the client it is given, so every read and
// write is the caller's identity. It renders nothing.
package syncview
