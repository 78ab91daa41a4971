package source

import (
	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// mirrorObjectCache bounds the decoded git objects a mirror's repository
// keeps between reads. go-git's default (git.PlainOpen) is 96 MiB per
// repository, which an agent keeps for as long as it runs: a repository
// of 2,500 small files held 14 MB of decoded blobs after one checkout.
// What a tree write or a delta needs again comes soon after it was read,
// so a few MiB keep most hits.
const mirrorObjectCache = 4 * cache.MiByte

// openMirror opens the bare repository at gitDir, as git.PlainOpen does,
// with an object cache of mirrorObjectCache, which it returns too: a
// checkout empties it once the tree is written (see Mirror.write).
func openMirror(gitDir string) (*git.Repository, cache.Object, error) {
	objects := cache.NewObjectLRU(mirrorObjectCache)
	repo, err := git.Open(filesystem.NewStorage(osfs.New(gitDir), objects), nil)
	return repo, objects, err
}
