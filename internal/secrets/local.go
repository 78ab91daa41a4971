package secrets

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// LocalKeys returns the age identities of the environment, where the sops
// CLI finds them: SOPS_AGE_KEY (identities), SOPS_AGE_KEY_FILE (a file of
// them), else sops/age/keys.txt in the user's configuration directory. It
// returns nil when none is set and the file does not exist.
func LocalKeys() (*Keys, error) {
	if v := os.Getenv("SOPS_AGE_KEY"); v != "" {
		return ParseKeys("SOPS_AGE_KEY", map[string][]byte{"env" + KeySuffix: []byte(v)})
	}
	file := os.Getenv("SOPS_AGE_KEY_FILE")
	explicit := file != ""
	if !explicit {
		dir, err := os.UserConfigDir()
		if err != nil {
			return nil, nil
		}
		file = filepath.Join(dir, "sops", "age", "keys.txt")
	}
	data, err := os.ReadFile(file)
	switch {
	case errors.Is(err, fs.ErrNotExist) && !explicit:
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("age key file %s (SOPS_AGE_KEY_FILE) cannot be read: %w", file, err)
	}
	return ParseKeys("age key file "+file, map[string][]byte{filepath.Base(file) + KeySuffix: data})
}
