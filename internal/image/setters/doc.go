// Package setters finds image markers in YAML files and rewrites the
// values they mark to the tags image policies select.
//
// Two kinds of markers are understood, the ones Flux users already have:
//
//   - Flux v2 setter comments on a scalar:
//     image: registry/app:1.0.0 # {"$imagepolicy": "ns:name"}
//     and the ":tag", ":name" and ":digest" variants, in any YAML file
//     (plain manifests, Kustomize images: entries, Helm values files);
//   - Flux v1 workload annotations, fluxcd.io/automated: "true" with an
//     optional fluxcd.io/tag.<container>: semver:~1.2 | glob:1.* |
//     regex:^v1\. per container, which imply a policy per container.
//
// Files are parsed with kyaml; the edit replaces only the bytes of the
// marked scalar, so comments, key order, quoting and formatting stay as
// they were.
package setters
