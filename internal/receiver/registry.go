package receiver

import (
	"fmt"
	"strings"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/source/oci"
)

// Registry endpoints: pushes of artifacts wake the Syncs with
// spec.source.oci of the pushed repository.
const (
	Harbor   = "harbor"
	Registry = "registry"
)

// Artifact is a tag pushed to a registry repository.
type Artifact struct {
	// Repository is host/path, as in oci://host/path.
	Repository string
	Tag        string
}

// parseHarbor reads a Harbor PUSH_ARTIFACT event
// (event_data.resources[].resource_url, which is host/path:tag).
func parseHarbor(body []byte) (Push, error) {
	var p struct {
		Type      string `json:"type"`
		EventData struct {
			Resources []struct {
				Tag         string `json:"tag"`
				ResourceURL string `json:"resource_url"`
			} `json:"resources"`
		} `json:"event_data"`
	}
	if err := decode(body, &p); err != nil {
		return Push{}, err
	}
	if p.Type != "PUSH_ARTIFACT" {
		return Push{}, fmt.Errorf("event type %q is not PUSH_ARTIFACT: choose only the artifact pushed event in Harbor's webhook policy", truncate(p.Type, 64))
	}
	var arts []Artifact
	for _, r := range p.EventData.Resources {
		repo, tag := r.ResourceURL, r.Tag
		if i := strings.LastIndexByte(repo, ':'); i > strings.LastIndexByte(repo, '/') {
			repo = repo[:i]
		}
		arts = append(arts, Artifact{Repository: repo, Tag: tag})
	}
	return registryPush(arts, "event_data.resources[].resource_url")
}

// parseRegistry reads the registry endpoint's body:
//
//	{"repository": "<host>/<path>", "tag": "<tag>"}
func parseRegistry(body []byte) (Push, error) {
	var p struct {
		Repository string `json:"repository"`
		Tag        string `json:"tag"`
	}
	if err := decode(body, &p); err != nil {
		return Push{}, err
	}
	return registryPush([]Artifact{{Repository: p.Repository, Tag: p.Tag}}, "repository")
}

func registryPush(arts []Artifact, field string) (Push, error) {
	var p Push
	for _, a := range arts {
		a.Repository = strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(a.Repository), "oci://"), "/"))
		if a.Tag == "" || strings.Contains(a.Repository, "://") || !strings.Contains(a.Repository, "/") {
			continue
		}
		p.Artifacts = append(p.Artifacts, a)
		p.Refs = append(p.Refs, a.Repository+":"+a.Tag)
	}
	if len(p.Artifacts) == 0 {
		return Push{}, fmt.Errorf("the payload names no pushed tag of a repository: %s is empty or not <host>/<path>, or the tag is empty", field)
	}
	return p, nil
}

// matchesArtifact reports whether a push of a wakes the OCI Sync o: same
// repository, and the tag it follows (latest by default), or any tag for
// a semver range. A pinned digest is never woken.
func matchesArtifact(o *v1alpha1.OCISource, a Artifact) bool {
	if o.Digest != "" {
		return false
	}
	repo := strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(o.URL, "oci://"), "/"))
	if repo != a.Repository {
		return false
	}
	if o.SemVer != "" {
		return true
	}
	tag := o.Tag
	if tag == "" {
		tag = oci.DefaultTag
	}
	return a.Tag == tag
}
