package source

import (
	"testing"

	"github.com/driftless/driftless/internal/testenv"
)

// A signature comes from whoever pushed the commit; allowed_signers from
// whoever wrote the Secret. Neither may crash the agent.

func FuzzParseSSHSignature(f *testing.F) {
	f.Add(sshSign(f, testenv.NewSSHSigningKey(f), gitNamespace, []byte("message")))
	f.Add(sshsigBegin + "\nU1NIU0lHAAAAAQ==\n" + sshsigEnd)
	f.Add(sshsigBegin + "\n" + sshsigEnd)
	f.Add("-----BEGIN PGP SIGNATURE-----\n")
	f.Fuzz(func(t *testing.T, armored string) {
		sig, err := parseSSHSignature(armored)
		if err == nil {
			_ = sig.verify([]byte("message"))
		}
	})
}

func FuzzParseAllowedSigners(f *testing.F) {
	f.Add("a@example.com ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGb3tlBAlOtwnTPVPzRYZWUYBZ3mJCM6Z0cHKhdmAqKv\n")
	f.Add(`"a,b" namespaces="git,!file" ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGb3tlBAlOtwnTPVPzRYZWUYBZ3mJCM6Z0cHKhdmAqKv c`)
	f.Add("# comment\n\n\"unterminated")
	f.Fuzz(func(t *testing.T, data string) {
		signers, err := parseAllowedSigners([]byte(data))
		for _, s := range signers {
			_ = s.allows(gitNamespace)
		}
		_ = err
	})
}
