package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	fage "filippo.io/age"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/internal/render"
	"github.com/driftless/driftless/internal/secrets"
)

func newSecretCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "secret",
		Short: "Make age keys and encrypt, decrypt and edit files with SOPS for the agent to decrypt",
		Long: `Keep Secrets in git encrypted with SOPS for age recipients; the agent
decrypts them in memory when it renders (spec.decryption, docs/secrets.md).

decrypt and edit read the age identities where the sops CLI does:
SOPS_AGE_KEY, SOPS_AGE_KEY_FILE, or sops/age/keys.txt in the user's
configuration directory (~/.config on Linux).`,
	}
	cmd.AddCommand(newSecretKeygenCommand(), newSecretEncryptCommand(), newSecretDecryptCommand(), newSecretEditCommand())
	return cmd
}

func newSecretKeygenCommand() *cobra.Command {
	var out, secret string
	var cluster clusterFlags
	cmd := &cobra.Command{
		Use:   "keygen (--out FILE | --create-secret NAMESPACE/NAME)",
		Short: "Make an age identity; print its public recipient",
		Long: `Make an age identity and print its public recipient (age1…), which
encrypts files for it (encrypt --age, or age: in .sops.yaml).

--out writes the identity to FILE, readable by its owner only; it must not
exist. --create-secret puts it in the Secret NAMESPACE/NAME of the cluster
as the entry age-<recipient prefix>.agekey, creating the Secret or adding
to it: a Sync names it in spec.decryption.secretRef. Adding a second
identity to the Secret is the first step of a key rotation.`,
		Example: `  # A key for the cluster, and its recipient for .sops.yaml
  driftless secret keygen --create-secret shop/sops-age

  # A key for me
  driftless secret keygen --out ~/.config/sops/age/keys.txt`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if (out == "") == (secret == "") {
				return errors.New("pass --out FILE or --create-secret NAMESPACE/NAME: where to keep the identity")
			}
			id, err := fage.GenerateX25519Identity()
			if err != nil {
				return err
			}
			recipient := id.Recipient().String()
			body := fmt.Sprintf("# public key: %s\n%s\n", recipient, id)
			if out != "" {
				if err := writeNew(out, []byte(body)); err != nil {
					return err
				}
			} else if err := createKeySecret(cmd.Context(), cluster, secret, recipient, []byte(body)); err != nil {
				return err
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), recipient)
			return err
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "write the identity to this file (mode 0600); it must not exist")
	cmd.Flags().StringVar(&secret, "create-secret", "", "put the identity in this Secret of the cluster, as NAMESPACE/NAME")
	cluster.add(cmd)
	return cmd
}

// writeNew writes data to a new file readable by its owner only.
func writeNew(name string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(name), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("write the identity: %w; choose a file that does not exist", err)
	}
	_, err = f.Write(data)
	return errors.Join(err, f.Close())
}

func createKeySecret(ctx context.Context, cluster clusterFlags, ref, recipient string, identity []byte) error {
	ns, name, ok := strings.Cut(ref, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return fmt.Errorf("--create-secret %q: write NAMESPACE/NAME, such as shop/sops-age", ref)
	}
	cl, err := cluster.connect()
	if err != nil {
		return err
	}
	entry := "age-" + recipient[4:14] + secrets.KeySuffix
	var s corev1.Secret
	err = cl.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &s)
	switch {
	case apierrors.IsNotFound(err):
		s = corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string][]byte{entry: identity}}
		if err := cl.client.Create(ctx, &s); err != nil {
			return fmt.Errorf("create Secret %s: %w", ref, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("read Secret %s: %w", ref, err)
	}
	patch := client.MergeFromWithOptions(s.DeepCopy(), client.MergeFromWithOptimisticLock{})
	if s.Data == nil {
		s.Data = map[string][]byte{}
	}
	s.Data[entry] = identity
	if err := cl.client.Patch(ctx, &s, patch); err != nil {
		return fmt.Errorf("add %s to Secret %s: %w", entry, ref, err)
	}
	return nil
}

func newSecretEncryptCommand() *cobra.Command {
	var inPlace bool
	var recipients []string
	cmd := &cobra.Command{
		Use:   "encrypt FILE",
		Short: "Encrypt a file with SOPS for age recipients",
		Long: `Encrypt FILE with SOPS for age recipients and print it, or with -i
replace it. The format follows the extension: .yaml/.yml, .json, .env,
.ini, anything else as binary.

The recipients and what to encrypt come from the first matching
creation rule of the nearest .sops.yaml, looking up from FILE to the
repository's root, as the sops CLI reads it; --age replaces its
recipients. Without a rule that says what to encrypt, only data and
stringData are (encrypted_regex ^(data|stringData)$), so that names,
labels and the rest of a manifest stay readable in a diff.`,
		Example: `  driftless secret encrypt -i --age age1qyq… apps/shop/db-secret.yaml`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			plain, err := os.ReadFile(name)
			if err != nil {
				return err
			}
			rule, err := secrets.RuleFor(name, repositoryRoot(name), recipients)
			if err != nil {
				return err
			}
			enc, err := secrets.Encrypt(name, plain, rule)
			if err != nil {
				return err
			}
			if inPlace {
				return replaceFile(name, enc)
			}
			_, err = cmd.OutOrStdout().Write(enc)
			return err
		},
	}
	cmd.Flags().BoolVarP(&inPlace, "in-place", "i", false, "replace FILE with its encrypted form instead of printing it")
	cmd.Flags().StringSliceVar(&recipients, "age", nil, "age recipients (age1…) to encrypt for, comma-separated, instead of those of .sops.yaml")
	return cmd
}

func newSecretDecryptCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "decrypt FILE",
		Short: "Print a file encrypted with SOPS, decrypted",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			plain, err := decryptLocal(args[0])
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(plain)
			return err
		},
	}
}

func newSecretEditCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "edit FILE",
		Short: "Edit a file encrypted with SOPS in $EDITOR, and encrypt it again",
		Long: `Decrypt FILE into a file readable by its owner only in a private
temporary directory, open it in $EDITOR (vi without it), and encrypt it
again for the same recipients, with the same rules, in place. The
decrypted copy is removed when the editor exits, whatever happened. An
edit that changes nothing leaves FILE as it was.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return editEncrypted(cmd.Context(), args[0], cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
}

func decryptLocal(name string) ([]byte, error) {
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	keys, err := secrets.LocalKeys()
	if err != nil {
		return nil, err
	}
	if keys == nil {
		return nil, errors.New("no age identity: set SOPS_AGE_KEY_FILE to a file of them (driftless secret keygen --out writes one)")
	}
	plain, err := keys.Decrypt(filepath.ToSlash(name), data)
	if err != nil {
		return nil, fmt.Errorf("file %s %w", name, err)
	}
	return plain, nil
}

func editEncrypted(ctx context.Context, name string, in io.Reader, out, errOut io.Writer) error {
	data, err := os.ReadFile(name)
	if err != nil {
		return err
	}
	rule, err := secrets.RuleOf(name, data)
	if err != nil {
		return err
	}
	plain, err := decryptLocal(name)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "driftless-secret-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	tmp := filepath.Join(dir, filepath.Base(name))
	if err := os.WriteFile(tmp, plain, 0o600); err != nil {
		return err
	}
	editor := os.Getenv("EDITOR")
	if editor == "" {
		editor = "vi"
	}
	c := exec.CommandContext(ctx, "sh", "-c", editor+` "$1"`, "sh", tmp)
	c.Stdin, c.Stdout, c.Stderr = in, out, errOut
	if err := c.Run(); err != nil {
		return fmt.Errorf("editor %q failed: %w; %s is unchanged", editor, err, name)
	}
	edited, err := os.ReadFile(tmp)
	if err != nil {
		return err
	}
	if bytes.Equal(edited, plain) {
		return nil
	}
	enc, err := secrets.Encrypt(name, edited, rule)
	if err != nil {
		return fmt.Errorf("%w; %s is unchanged", err, name)
	}
	return replaceFile(name, enc)
}

// replaceFile writes data to name through a temporary file in the same
// directory, keeping name's mode.
func replaceFile(name string, data []byte) error {
	mode := os.FileMode(0o644)
	if fi, err := os.Stat(name); err == nil {
		mode = fi.Mode().Perm()
	}
	f, err := os.CreateTemp(filepath.Dir(name), ".driftless-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	_, err = f.Write(data)
	if err = errors.Join(err, f.Chmod(mode), f.Close()); err != nil {
		return err
	}
	return os.Rename(f.Name(), name)
}

// repositoryRoot returns the top directory of the git checkout that holds
// file, or "" when it is in none.
func repositoryRoot(file string) string {
	dir, err := filepath.Abs(filepath.Dir(file))
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, ".git")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// localDecryptor returns the age identities of the environment as a
// render.Decryptor, for offline renders; nil when there are none.
func localDecryptor() (render.Decryptor, error) {
	keys, err := secrets.LocalKeys()
	if err != nil || keys == nil {
		return nil, err
	}
	return keys, nil
}
