package source

import "github.com/go-git/go-git/v5/plumbing/transport"

// AuthMethod returns the go-git auth of the credentials for url (nil for
// none), for callers that push with the same credentials they fetch with
// (image automation).
func (c Credentials) AuthMethod(url string) (transport.AuthMethod, error) {
	return c.authMethod(url)
}
