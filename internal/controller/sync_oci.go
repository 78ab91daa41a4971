package controller

import (
	"errors"
	"fmt"

	"github.com/Masterminds/semver/v3"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/source/oci"
)

// checkOCISpec returns what is wrong with the OCI source of s (which
// checkSpec stalls on): a URL that is no repository, a semver that is no
// range, a registry host a tenant may not fetch from.
func checkOCISpec(s *v1alpha1.Sync, t *Tenancy) []error {
	o := s.Spec.Source.OCI
	var errs []error
	repo, err := oci.ParseRepository(o.URL, o.Insecure)
	if err != nil {
		errs = append(errs, fmt.Errorf("spec.source.oci.url: %w", err))
	}
	if o.SemVer != "" {
		if _, err := semver.NewConstraint(o.SemVer); err != nil {
			errs = append(errs, fmt.Errorf("spec.source.oci.semver %q is not a version range (such as \">=1.0.0 <2.0.0\" or \"1.x\"): %v", o.SemVer, err))
		}
	}
	if t != nil && t.tenant(s) && err == nil && !t.SourceHosts.Allows(repo.RegistryStr()) {
		errs = append(errs, fmt.Errorf("spec.source.oci.url %q is on registry %s, which a Sync outside the agent's namespace may not fetch from (the agent's --tenant-source-hosts allows %s): "+
			"use an allowed registry, or ask the cluster's administrator to add it to --tenant-source-hosts", o.URL, repo.RegistryStr(), t.SourceHosts))
	}
	if s.Spec.ImageUpdate != nil {
		errs = append(errs, errors.New("spec.imageUpdate commits to git, and spec.source.oci is no git repository: remove spec.imageUpdate, or follow the git repository the artifact is built from"))
	}
	return errs
}
